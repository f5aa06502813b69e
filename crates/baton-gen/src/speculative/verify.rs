//! A verification step's rows walked in order, each drawn from as plain
//! decoding draws a position's token, while they confirm the drafts.

/// What a row's token does to the sequence, as the caller's draw decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drawn {
    /// The token was drawn and taken; the sequence goes on.
    Token(u32),
    /// The sequence ends here (its token, if any, was the last).
    End,
}

/// The outcome of a verification step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    /// Drafts accepted: their positions in the cache are the sequence's.
    pub accepted: usize,
    /// The token to evaluate next (the first row not accepted gave it), or
    /// `None` when the sequence ended.
    pub next: Option<u32>,
}

/// Walks a verification step's rows (`rows[i]`: the logits after the
/// evaluated token and the first `i` drafts; `drafts.len() + 1` of them),
/// drawing each with `draw` exactly as plain decoding draws a position's
/// token, while the drawn token is the draft: the first row whose token
/// differs, or the last row, gives the next token, and no row after it is
/// drawn from.
pub fn verify<'a, E>(
    rows: impl IntoIterator<Item = &'a [f32]>,
    drafts: &[u32],
    mut draw: impl FnMut(&[f32]) -> Result<Drawn, E>,
) -> Result<Verified, E> {
    let mut rows = rows.into_iter();
    for i in 0..=drafts.len() {
        let Some(row) = rows.next() else { break };
        match draw(row)? {
            Drawn::End => return Ok(Verified { accepted: i, next: None }),
            Drawn::Token(token) if drafts.get(i) == Some(&token) => {}
            Drawn::Token(token) => return Ok(Verified { accepted: i, next: Some(token) }),
        }
    }
    // Fewer rows than drafts + 1: a caller's bug, stopped at what was read.
    Ok(Verified { accepted: drafts.len(), next: None })
}
