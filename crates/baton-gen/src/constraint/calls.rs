//! Several tool calls in one answer (`parallel_tool_calls`): each call's
//! object held to the tools' schema as one call is, and between two calls
//! only what the Hermes format writes there: [`TOOL_CALL_CLOSE`], then
//! [`TOOL_CALL_OPEN`] (each after at most [`MAX_GAP_SPACES`] bytes of
//! whitespace). After a call's object, or after its closing tag, the text
//! may end: an end-of-generation (control) token is allowed there and
//! nowhere else. After [`MAX_CALLS`] calls the text is complete.

use std::sync::Arc;

use super::json::is_space;
use super::schema::Schema;
use super::schema_prefix::SchemaPrefix;
use super::tags::{TOOL_CALL_CLOSE, TOOL_CALL_OPEN};

/// Most calls one answer may hold.
pub const MAX_CALLS: usize = 8;

/// Most whitespace bytes before a tag or a call's object.
pub const MAX_GAP_SPACES: usize = 2;

#[derive(Clone, Debug)]
enum Between {
    /// Inside a call's object.
    Call(SchemaPrefix),
    /// After a whole object: `spaces` of whitespace, then `matched` bytes
    /// of [`TOOL_CALL_CLOSE`].
    Closing { spaces: usize, matched: usize },
    /// After the closing tag: whitespace, then `matched` bytes of
    /// [`TOOL_CALL_OPEN`].
    Opening { spaces: usize, matched: usize },
    /// After an opening tag, before the next object's first byte.
    Opened { spaces: usize },
}

/// The calls written so far.
#[derive(Clone, Debug)]
pub(super) struct Calls {
    schema: Arc<Schema>,
    at: Between,
    /// Calls whose objects are whole.
    done: usize,
}

impl Calls {
    /// At the start of the first call's object (after its opening tag).
    pub(super) fn new(schema: Arc<Schema>) -> Calls {
        Calls { at: Between::Opened { spaces: 0 }, schema, done: 0 }
    }

    /// Inside the first call, whose object so far is `call`.
    pub(super) fn within(schema: Arc<Schema>, call: SchemaPrefix) -> Calls {
        Calls { at: Between::Call(call), schema, done: 0 }
    }

    /// Whether the text is whole: the last call it may hold has closed.
    pub(super) fn is_complete(&self) -> bool {
        self.done >= MAX_CALLS
    }

    /// Takes a token's bytes (empty for a control token, which may end
    /// the text only after a whole call).
    pub(super) fn push_token(&mut self, bytes: &[u8]) -> bool {
        if bytes.is_empty() {
            return matches!(self.at, Between::Closing { matched: 0, .. } | Between::Opening { matched: 0, .. });
        }
        bytes.iter().all(|&b| self.push(b))
    }

    fn push(&mut self, b: u8) -> bool {
        if self.is_complete() {
            return false;
        }
        let closing = matches!(self.at, Between::Closing { .. });
        let tag = if closing { TOOL_CALL_CLOSE.as_bytes() } else { TOOL_CALL_OPEN.as_bytes() };
        match &mut self.at {
            Between::Call(call) => {
                if !call.push(b) {
                    return false;
                }
                if call.is_complete() {
                    self.done += 1;
                    self.at = Between::Closing { spaces: 0, matched: 0 };
                }
                true
            }
            Between::Closing { spaces, matched } | Between::Opening { spaces, matched } => {
                if *matched == 0 && is_space(b) {
                    *spaces += 1;
                    return *spaces <= MAX_GAP_SPACES;
                }
                if tag.get(*matched) != Some(&b) {
                    return false;
                }
                *matched += 1;
                if *matched == tag.len() {
                    self.at = match closing {
                        true => Between::Opening { spaces: 0, matched: 0 },
                        false => Between::Opened { spaces: 0 },
                    };
                }
                true
            }
            Between::Opened { spaces } => {
                if is_space(b) {
                    *spaces += 1;
                    return *spaces <= MAX_GAP_SPACES;
                }
                self.at = Between::Call(SchemaPrefix::new(self.schema.clone()));
                self.push(b)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn calls() -> Calls {
        let args = json!({"type": "object", "properties": {"q": {"enum": ["a", "b"]}}, "required": ["q"]});
        Calls::new(Arc::new(Schema::tool_call([("f", &args)]).expect("compiles")))
    }

    #[test]
    fn calls_follow_one_another_through_their_tags_and_may_end_after_each() {
        let one = r#"{"name": "f", "arguments": {"q": "a"}}"#;
        let mut text = calls();
        assert!(!text.push_token(&[]), "no end before a call");
        assert!(text.push_token(one.as_bytes()));
        assert!(text.clone().push_token(&[]), "an end after a whole call");
        assert!(text.push_token(b"\n</tool_call>\n"));
        assert!(text.clone().push_token(&[]), "an end after the closing tag");
        assert!(text.push_token(b"<tool_call>\n"));
        assert!(!text.clone().push_token(&[]), "no end inside the opened call");
        assert!(!text.clone().push_token(b"{\"name\": \"g\""), "the second call is held too");
        assert!(text.push_token(one.as_bytes()));
        assert!(!text.clone().push_token(b"words"), "only tags between calls");
        assert!(!text.clone().push_token(b"\n\n\n</tool_call>"), "whitespace is bounded");
        assert!(!text.is_complete());
    }

    #[test]
    fn the_last_call_allowed_completes_the_text() {
        let one = r#"{"name": "f", "arguments": {"q": "b"}}"#;
        let mut text = calls();
        for i in 0..MAX_CALLS {
            assert!(!text.is_complete(), "call {i}");
            assert!(text.push_token(one.as_bytes()), "call {i}");
            if i + 1 < MAX_CALLS {
                assert!(text.push_token(b"\n</tool_call>\n<tool_call>\n"), "call {i}");
            }
        }
        assert!(text.is_complete());
        assert!(!text.push_token(b"\n"), "nothing follows the last call");
    }
}
