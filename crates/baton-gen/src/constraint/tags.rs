//! The tags that open and close a tool call in the Hermes format, and
//! the markers of one in gpt-oss's harmony format, in Gemma 4's and in the XML
//! form of Qwen 3.5.

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

/// What starts a harmony call anywhere in an answer (after thinking on
/// the analysis channel): the commentary channel addressed to a function,
/// or the recipient in a new message's role header.
pub const HARMONY_CALL_TRIGGERS: [&str; 2] =
    ["<|channel|>commentary to=functions.", "<|start|>assistant to=functions."];

/// What follows a harmony call's name: its arguments are JSON.
pub const HARMONY_CONSTRAIN_JSON: &str = " <|constrain|>json";

/// What opens a harmony message's body (a call's arguments).
pub const HARMONY_MESSAGE: &str = "<|message|>";

/// What ends a harmony tool call (an end-of-generation token).
pub const HARMONY_CALL_END: &str = "<|call|>";

/// What opens a tool call in Gemma 4's format:
/// `<|tool_call>call:NAME{key:value,…}<tool_call|>`.
pub const GEMMA4_CALL_OPEN: &str = "<|tool_call>";

/// What names a Gemma 4 call's function, right after [`GEMMA4_CALL_OPEN`].
pub const GEMMA4_CALL_NAME: &str = "call:";

/// What closes a Gemma 4 tool call.
pub const GEMMA4_CALL_CLOSE: &str = "<tool_call|>";

/// What opens and closes a string in Gemma 4's argument values (the same
/// marker on both sides, nothing escaped between them).
pub const GEMMA4_QUOTE: &str = "<|\"|>";

/// What opens the function of a call in the XML form (Qwen 3.5 and 3.6,
/// Qwen3-Coder), inside [`TOOL_CALL_OPEN`]: `<function=NAME>`.
pub const XML_FUNCTION_OPEN: &str = "<function=";

/// What closes it.
pub const XML_FUNCTION_CLOSE: &str = "</function>";

/// What opens one of its parameters: `<parameter=KEY>`, the value on the
/// lines after it.
pub const XML_PARAMETER_OPEN: &str = "<parameter=";

/// What closes a parameter's value.
pub const XML_PARAMETER_CLOSE: &str = "</parameter>";
