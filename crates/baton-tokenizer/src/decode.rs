//! Decoding ids to text, whole or token by token.
//!
//! Each token stands for bytes: byte-level BPE characters map back to their
//! bytes, SentencePiece `▁` becomes a space and `<0xXX>` one byte. A
//! character may be split across tokens (an emoji as four byte tokens), so
//! the [`StreamDecoder`] holds bytes back until they form whole characters.
//!
//! Control, unknown and unused tokens render as nothing, or as their text
//! when `render_special` is on; user-defined tokens always render as text.
//! For SentencePiece models with `add_space_prefix`, the encoder put a space
//! before the text and after each special token, so the decoder drops one
//! leading space of the first text token after the start or a special token.

use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::Arc;

use crate::config::{ModelKind, TokenType};
use crate::error::Result;
use crate::tokenizer::Tokenizer;

impl Tokenizer {
    /// Decodes ids to text; control tokens render as nothing. Bytes that are
    /// not valid UTF-8 become U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.decode_with(ids, false)
    }

    /// Decodes ids to text; `render_special` renders control, unknown and
    /// unused tokens as their text.
    pub fn decode_with(&self, ids: &[u32], render_special: bool) -> Result<String> {
        let mut stream = self.stream_decoder(render_special);
        let mut text = String::new();
        for &id in ids {
            if let Some(part) = stream.push(id)? {
                text.push_str(&part);
            }
        }
        if let Some(rest) = stream.finish() {
            text.push_str(&rest);
        }
        Ok(text)
    }

    /// A decoder for ids that arrive one at a time (generation).
    pub fn stream_decoder(&self, render_special: bool) -> StreamDecoder<'_> {
        StreamDecoder::over(self, render_special)
    }

    /// A decoder that holds its own handle to the tokenizer, for a caller
    /// that cannot hold a borrow (a Python iterator, a spawned task).
    pub fn shared_stream_decoder(self: &Arc<Self>, render_special: bool) -> StreamDecoder<'static, Arc<Tokenizer>> {
        StreamDecoder::over(self.clone(), render_special)
    }

    fn strips_space(&self) -> bool {
        self.kind == ModelKind::SentencePiece && self.add_space_prefix
    }

    /// The bytes a token stands for (no space stripping), or nothing for a
    /// special token when `render_special` is off.
    pub fn token_bytes(&self, id: u32, render_special: bool) -> Result<&[u8]> {
        let index = self.checked_index(id)?;
        Ok(match self.types[index] {
            TokenType::Control | TokenType::Unknown | TokenType::Unused if !render_special => &[],
            _ => self.pieces.get(index),
        })
    }
}

/// Turns ids into text incrementally, never emitting half a character.
///
/// ```
/// # use baton_tokenizer::{synthetic_bpe, EncodeOptions, Tokenizer};
/// let tokenizer = Tokenizer::from_config(&synthetic_bpe(512))?;
/// let ids = tokenizer.encode("naïve 🙂", EncodeOptions::default())?;
/// let mut stream = tokenizer.stream_decoder(false);
/// let mut text = String::new();
/// for id in ids {
///     if let Some(part) = stream.push(id)? {
///         text.push_str(&part);
///     }
/// }
/// assert_eq!(text, "naïve 🙂");
/// # Ok::<(), baton_tokenizer::TokenizerError>(())
/// ```
///
/// `T` is how it reaches the tokenizer: a borrow
/// ([`Tokenizer::stream_decoder`]) or an owned handle
/// ([`Tokenizer::shared_stream_decoder`]).
#[derive(Debug)]
pub struct StreamDecoder<'t, T: Deref<Target = Tokenizer> = &'t Tokenizer> {
    tokenizer: T,
    render_special: bool,
    /// Bytes of an unfinished UTF-8 character.
    pending: Vec<u8>,
    /// Drop one leading space from the next text token (SentencePiece).
    strip_space: bool,
    borrow: PhantomData<&'t Tokenizer>,
}

impl<T: Deref<Target = Tokenizer>> StreamDecoder<'_, T> {
    fn over(tokenizer: T, render_special: bool) -> Self {
        let strip_space = tokenizer.strips_space();
        StreamDecoder { tokenizer, render_special, pending: Vec::new(), strip_space, borrow: PhantomData }
    }

    /// Adds one token; returns the text it completes, if any.
    pub fn push(&mut self, id: u32) -> Result<Option<String>> {
        let tokenizer = &*self.tokenizer;
        let kind = tokenizer.token_type(id)?;
        let mut bytes = tokenizer.token_bytes(id, self.render_special)?;
        if matches!(kind, TokenType::Control | TokenType::UserDefined | TokenType::Unknown) {
            self.strip_space = tokenizer.strips_space();
        } else if !bytes.is_empty() && self.strip_space {
            if let Some(rest) = bytes.strip_prefix(b" ") {
                bytes = rest;
            }
            self.strip_space = false;
        }
        self.pending.extend_from_slice(bytes);
        Ok(self.take_complete())
    }

    /// Ends the stream: returns held-back bytes of an unfinished character
    /// (as U+FFFD) and resets the decoder for a new sequence.
    pub fn finish(&mut self) -> Option<String> {
        let rest = (!self.pending.is_empty()).then(|| String::from_utf8_lossy(&self.pending).into_owned());
        self.pending.clear();
        self.strip_space = self.tokenizer.strips_space();
        rest
    }

    /// Whether bytes of an unfinished character are held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Moves the complete characters out of `pending`; invalid sequences
    /// become U+FFFD, an unfinished one at the end stays.
    fn take_complete(&mut self) -> Option<String> {
        let mut text = String::new();
        let mut start = 0;
        loop {
            match std::str::from_utf8(&self.pending[start..]) {
                Ok(valid) => {
                    text.push_str(valid);
                    start = self.pending.len();
                    break;
                }
                Err(error) => {
                    let valid_end = start + error.valid_up_to();
                    text.push_str(&String::from_utf8_lossy(&self.pending[start..valid_end]));
                    match error.error_len() {
                        None => {
                            start = valid_end;
                            break;
                        }
                        Some(bad) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            start = valid_end + bad;
                        }
                    }
                }
            }
        }
        self.pending.drain(..start);
        (!text.is_empty()).then_some(text)
    }
}
