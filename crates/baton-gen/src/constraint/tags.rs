//! The tags that open and close a tool call in the Hermes format, and
//! the markers of one in gpt-oss's harmony format.

/// What opens a tool call in the model's answer (the text the tools'
/// instructions ask for); the call's JSON follows it.
pub const TOOL_CALL_OPEN: &str = "<tool_call>";

/// What closes a tool call.
pub const TOOL_CALL_CLOSE: &str = "</tool_call>";

/// What a harmony tool call's header names its function by, before the
/// name: `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}`.
pub const HARMONY_RECIPIENT: &str = "to=functions.";

/// The channel a harmony tool call is written on, with the space before
/// its recipient (what a required call's prompt ends with).
pub const HARMONY_CALL_CHANNEL: &str = "<|channel|>commentary ";

/// What follows a harmony call's name: its arguments are JSON.
pub const HARMONY_CONSTRAIN_JSON: &str = " <|constrain|>json";

/// What opens a harmony message's body (a call's arguments).
pub const HARMONY_MESSAGE: &str = "<|message|>";

/// What ends a harmony tool call (an end-of-generation token).
pub const HARMONY_CALL_END: &str = "<|call|>";
