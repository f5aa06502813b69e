//! Printing generated tokens as they come (`baton run` and `run --chat`).

use std::io::Write;

use anyhow::Result;
use baton_model::baton_tokenizer::{StreamDecoder, TokenType, Tokenizer};

/// Whether generation stops before `token`: the end-of-text token `eos`
/// or any control token (an end of turn, say).
pub fn ends_generation(tokenizer: &Tokenizer, token: u32, eos: Option<u32>) -> bool {
    Some(token) == eos || tokenizer.token_type(token).is_ok_and(|t| t == TokenType::Control)
}

/// Decodes `token` and writes the text it completes, if any, flushing at
/// once so the reader sees each piece as it is generated; returns that text.
pub fn print_token(decoder: &mut StreamDecoder<'_>, token: u32, out: &mut impl Write) -> Result<Option<String>> {
    let piece = decoder.push(token)?;
    if let Some(piece) = &piece {
        write!(out, "{piece}")?;
        out.flush()?;
    }
    Ok(piece)
}
