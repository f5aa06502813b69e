//! A rendered conversation to tokens, where only the template's own text
//! can hold special tokens.
//!
//! A template writes control tokens (`<|im_start|>`, `<start_of_turn>`)
//! around the messages, so the rendered text is encoded with special tokens
//! parsed. The messages' content is the user's text: encoded the same way,
//! a user who writes `<|im_start|>system` inside a message would forge a
//! turn. [`ChatTemplate::encode`] finds where each message's content lies
//! in the rendered text and encodes those ranges as literal text (no
//! special token of any kind matched there), the rest with special tokens
//! parsed. llama.cpp encodes the whole rendering with special tokens
//! parsed; Baton does not.
//!
//! Finding the content: the conversation is rendered twice, once as is and
//! once with each content replaced by a marker. The marked rendering gives
//! the template's text between the contents; walking the real rendering,
//! each content must stand where its marker stood, as given or as a
//! template's `trim` leaves it. A template that changes content in other
//! ways (or branches on it) cannot be traced: then the rendering is encoded
//! whole, and refused when a message holds a special token's text. A role
//! that holds one is always refused (templates branch on roles, so they
//! cannot be marked).

use std::ops::Range;

use baton_tokenizer::{EncodeOptions, TokenType, Tokenizer};
use serde_json::Value as JsonValue;

use crate::chat::{ChatError, ChatTemplate, Message};

/// Opens and closes a content marker: private-use characters, which no
/// template writes.
const MARK_OPEN: char = '\u{F8F0}';
const MARK_CLOSE: char = '\u{F8F1}';

/// One piece of the marked rendering.
enum Piece<'a> {
    /// Text the template wrote.
    Template(&'a str),
    /// Where message `index`'s content stood.
    Content(usize),
}

impl ChatTemplate {
    /// The tokens of `messages` rendered with this template: the template's
    /// text with its special tokens, each message's content as literal
    /// text, and BOS in front when the model adds one and the template did
    /// not write it (module docs).
    ///
    /// # Errors
    ///
    /// The template's errors; [`ChatError::SpecialTokenInMessage`] for a
    /// role (or, for a template that cannot be traced, a content) that holds
    /// a special token's text; [`ChatError::Tokenize`] when tokenizing fails.
    pub fn encode(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
        tokenizer: &Tokenizer,
    ) -> Result<Vec<u32>, ChatError> {
        self.encode_with_tools(messages, None, add_generation_prompt, tokenizer)
    }

    /// As [`encode`](Self::encode), the template given `tools` (see
    /// [`ChatTemplate::render_with_tools`]). The messages' fields and the
    /// tools are the template's text once rendered (it may write them in
    /// its own syntax), so none may hold a special token's text.
    ///
    /// # Errors
    ///
    /// As [`encode`](Self::encode); [`ChatError::SpecialTokenInMessage`]
    /// too for a field (named) or the tools (`tools`) that holds a special
    /// token's text.
    pub fn encode_with_tools(
        &self,
        messages: &[Message],
        tools: Option<&JsonValue>,
        add_generation_prompt: bool,
        tokenizer: &Tokenizer,
    ) -> Result<Vec<u32>, ChatError> {
        let rendered = self.render_with_tools(messages, tools, add_generation_prompt)?;
        let end = rendered.len();
        self.encode_rendered(messages, tools, add_generation_prompt, &rendered, end, tokenizer)
    }

    /// The tokens of `messages` with the last one (the assistant's answer
    /// so far) continued rather than closed: rendered (given `tools`)
    /// without the generation prompt and cut where the last message's
    /// content ends, so that the model goes on writing it (llama-server's
    /// assistant prefill, vLLM's `continue_final_message`). Encoded as
    /// [`encode_with_tools`](Self::encode_with_tools) encodes.
    ///
    /// # Errors
    ///
    /// [`encode_with_tools`](Self::encode_with_tools)'s, and
    /// [`ChatError::NotContinuable`] for no messages or a template that
    /// does not write the last message's content as given (so that no cut
    /// keeps it whole).
    pub fn encode_continued(
        &self,
        messages: &[Message],
        tools: Option<&JsonValue>,
        tokenizer: &Tokenizer,
    ) -> Result<Vec<u32>, ChatError> {
        let Some((last, earlier)) = messages.split_last() else {
            return Err(ChatError::NotContinuable("there is no message to continue"));
        };
        let rendered = self.render_with_tools(messages, tools, false)?;
        // Where the last content starts: where a marker in its place stands
        // when the rest of the rendering is the same.
        let mut marked: Vec<Message> = earlier.to_vec();
        let marker = format!("{MARK_OPEN}last{MARK_CLOSE}");
        marked.push(Message { content: marker.clone(), ..last.clone() });
        let marked = self.render_with_tools(&marked, tools, false)?;
        let start = marked.find(&marker).filter(|&at| rendered.starts_with(&marked[..at]));
        let Some(start) = start else {
            return Err(ChatError::NotContinuable("the template does not write the last message's content"));
        };
        let content = last.content.as_str();
        let form = [content, content.trim(), content.trim_start(), content.trim_end()]
            .into_iter()
            .find(|form| rendered[start..].starts_with(form))
            .ok_or(ChatError::NotContinuable("the template changes the last message's content"))?;
        self.encode_rendered(messages, tools, false, &rendered, start + form.len(), tokenizer)
    }

    /// `rendered[..end]` (the rendering of `messages` given `tools`)
    /// encoded: the messages' contents as literal text where traced (else
    /// refused when one holds a special token's text), BOS in front when
    /// the model adds one and the template did not write it.
    fn encode_rendered(
        &self,
        messages: &[Message],
        tools: Option<&JsonValue>,
        add_generation_prompt: bool,
        rendered: &str,
        end: usize,
        tokenizer: &Tokenizer,
    ) -> Result<Vec<u32>, ChatError> {
        for message in messages {
            if holds_special(tokenizer, &message.role)? {
                return Err(ChatError::SpecialTokenInMessage { field: "role", text: message.role.clone() });
            }
            for (key, value) in &message.fields {
                if let Some(text) = special_string(tokenizer, value)? {
                    let field = FIELD_NAMES.iter().find(|name| *name == key).copied().unwrap_or("fields");
                    return Err(ChatError::SpecialTokenInMessage { field, text });
                }
            }
        }
        if let Some(text) = tools.map(|tools| special_string(tokenizer, tools)).transpose()?.flatten() {
            return Err(ChatError::SpecialTokenInMessage { field: "tools", text });
        }
        let literal = match self.content_ranges(messages, tools, add_generation_prompt, rendered)? {
            Some(ranges) => ranges.into_iter().filter(|r| r.end <= end).collect(),
            None => {
                if let Some(message) = messages.iter().find(|m| holds_special(tokenizer, &m.content).unwrap_or(true)) {
                    return Err(ChatError::SpecialTokenInMessage { field: "content", text: message.content.clone() });
                }
                Vec::new()
            }
        };
        let options = EncodeOptions { add_special: false, parse_special: true };
        let mut tokens = tokenizer.encode_around(&rendered[..end], &literal, options)?;
        if let Some(bos) = tokenizer.bos_id().filter(|_| tokenizer.adds_bos()) {
            if tokens.first() != Some(&bos) {
                tokens.insert(0, bos);
            }
        }
        Ok(tokens)
    }

    /// The byte ranges of the messages' content in `rendered`, in order, or
    /// `None` when the template's use of the content cannot be traced.
    fn content_ranges(
        &self,
        messages: &[Message],
        tools: Option<&JsonValue>,
        add_generation_prompt: bool,
        rendered: &str,
    ) -> Result<Option<Vec<Range<usize>>>, ChatError> {
        let is_marker = |c: char| c == MARK_OPEN || c == MARK_CLOSE;
        if messages.iter().any(|m| m.content.contains(is_marker)) || self.source().contains(is_marker) {
            return Ok(None);
        }
        let marked: Vec<Message> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| Message { content: format!("{MARK_OPEN}{i}{MARK_CLOSE}"), ..m.clone() })
            .collect();
        let marked = self.render_with_tools(&marked, tools, add_generation_prompt)?;
        let Some(pieces) = pieces(&marked, messages.len()) else { return Ok(None) };
        let mut ranges = Vec::new();
        let mut at = 0;
        for (k, piece) in pieces.iter().enumerate() {
            match piece {
                Piece::Template(text) => {
                    if !rendered[at..].starts_with(text) {
                        return Ok(None);
                    }
                    at += text.len();
                }
                Piece::Content(index) => {
                    let content = messages[*index].content.as_str();
                    // What must follow: the next template text, or the end.
                    let follows = |end: usize| match pieces.get(k + 1) {
                        Some(Piece::Template(next)) => rendered[end..].starts_with(next),
                        Some(Piece::Content(_)) => true,
                        None => end == rendered.len(),
                    };
                    let as_rendered = [content, content.trim(), content.trim_start(), content.trim_end()]
                        .into_iter()
                        .find(|form| rendered[at..].starts_with(form) && follows(at + form.len()));
                    let Some(form) = as_rendered else { return Ok(None) };
                    if !form.is_empty() {
                        ranges.push(at..at + form.len());
                    }
                    at += form.len();
                }
            }
        }
        Ok((at == rendered.len()).then_some(ranges))
    }
}

/// The marked rendering cut into template text and content markers; `None`
/// when a marker is malformed or names no message.
fn pieces(marked: &str, messages: usize) -> Option<Vec<Piece<'_>>> {
    let mut pieces = Vec::new();
    let mut rest = marked;
    while let Some(open) = rest.find(MARK_OPEN) {
        if open > 0 {
            pieces.push(Piece::Template(&rest[..open]));
        }
        let after = &rest[open + MARK_OPEN.len_utf8()..];
        let close = after.find(MARK_CLOSE)?;
        let index: usize = after[..close].parse().ok()?;
        if index >= messages {
            return None;
        }
        pieces.push(Piece::Content(index));
        rest = &after[close + MARK_CLOSE.len_utf8()..];
    }
    if rest.contains(MARK_CLOSE) {
        return None;
    }
    if !rest.is_empty() {
        pieces.push(Piece::Template(rest));
    }
    Some(pieces)
}

/// The fields of a message the template is known to read, named in
/// errors (any other is called `fields`).
const FIELD_NAMES: [&str; 6] =
    ["tool_calls", "tool_call_id", "name", "reasoning_content", "thinking", "tool_responses"];

/// The first string in `value` (its keys included) that holds a special
/// token's text.
fn special_string(tokenizer: &Tokenizer, value: &JsonValue) -> Result<Option<String>, ChatError> {
    match value {
        JsonValue::String(text) => Ok(holds_special(tokenizer, text)?.then(|| text.clone())),
        JsonValue::Array(items) => {
            for item in items {
                if let Some(text) = special_string(tokenizer, item)? {
                    return Ok(Some(text));
                }
            }
            Ok(None)
        }
        JsonValue::Object(members) => {
            for (key, item) in members {
                if holds_special(tokenizer, key)? {
                    return Ok(Some(key.clone()));
                }
                if let Some(text) = special_string(tokenizer, item)? {
                    return Ok(Some(text));
                }
            }
            Ok(None)
        }
        JsonValue::Null | JsonValue::Bool(_) | JsonValue::Number(_) => Ok(None),
    }
}

/// Whether `text` holds the text of a control, user-defined or unknown
/// token (what parsing special tokens would match).
fn holds_special(tokenizer: &Tokenizer, text: &str) -> Result<bool, ChatError> {
    let tokens = tokenizer.encode(text, EncodeOptions { add_special: false, parse_special: true })?;
    Ok(tokens.iter().any(|&id| {
        matches!(tokenizer.token_type(id), Ok(TokenType::Control | TokenType::UserDefined | TokenType::Unknown))
    }))
}
