//! The tags that open and close a tool call in the Hermes format.

/// What opens a tool call in the model's answer (the text the tools'
/// instructions ask for); the call's JSON follows it.
pub const TOOL_CALL_OPEN: &str = "<tool_call>";

/// What closes a tool call.
pub const TOOL_CALL_CLOSE: &str = "</tool_call>";
