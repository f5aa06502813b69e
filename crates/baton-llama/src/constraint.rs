//! Decoding held to a format: each step, the tokens that cannot continue
//! the text so far are taken out before the sampler draws.
//!
//! [`JsonObject`] keeps the text a JSON object (`response_format:
//! {"type": "json_object"}`): a token is allowed when its bytes keep the
//! text a prefix of a valid JSON text whose top-level value is an object;
//! end-of-generation tokens are never allowed, and the caller ends the
//! generation once the object is complete. A caller draws first and
//! checks the token ([`JsonObject::allows`], one short check); only a token
//! that does not fit makes it [`mask`](JsonObject::mask) the logits and
//! draw again. The mask checks the likeliest [`CANDIDATES`] tokens and
//! sets the others aside; only when none of those may follow is the whole
//! vocabulary checked. So the draw is among the likely tokens that fit
//! (the sampler's own top-k, top-p and min-p then apply to them as usual).

mod json;

pub use json::{JsonPrefix, MAX_DEPTH};

use crate::Tokenizer;

/// Tokens checked first each step, the likeliest.
pub const CANDIDATES: usize = 256;

/// A text held to be one JSON object.
#[derive(Clone, Debug)]
pub struct JsonObject {
    prefix: JsonPrefix,
}

impl Default for JsonObject {
    fn default() -> Self {
        JsonObject { prefix: JsonPrefix::object() }
    }
}

impl JsonObject {
    /// The constraint before any token.
    pub fn new() -> JsonObject {
        JsonObject::default()
    }

    /// Whether the text is a whole JSON object (the generation ends here).
    pub fn is_complete(&self) -> bool {
        self.prefix.is_complete()
    }

    /// Whether `token` may come next.
    pub fn allows(&self, token: u32, tokenizer: &Tokenizer) -> bool {
        match tokenizer.token_bytes(token, false) {
            // Control tokens (no text) never continue the object.
            Ok(bytes) if !bytes.is_empty() => self.prefix.clone().push_all(bytes),
            _ => false,
        }
    }

    /// Sets the logit of every token that may not come next to minus
    /// infinity; returns how many may (0: none can continue the text).
    pub fn mask(&self, logits: &mut [f32], tokenizer: &Tokenizer) -> usize {
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        let by_logit = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]);
        let first = CANDIDATES.min(order.len());
        if first < order.len() {
            order.select_nth_unstable_by(first, by_logit);
        }
        let mut allowed: Vec<u32> = order[..first].iter().copied().filter(|&t| self.allows(t, tokenizer)).collect();
        if allowed.is_empty() {
            allowed = order[first..].iter().copied().filter(|&t| self.allows(t, tokenizer)).collect();
        }
        let mut keep = vec![false; logits.len()];
        allowed.iter().for_each(|&t| keep[t as usize] = true);
        logits.iter_mut().zip(&keep).filter(|(_, &k)| !k).for_each(|(l, _)| *l = f32::NEG_INFINITY);
        allowed.len()
    }

    /// Takes the token drawn; `false` if it could not continue the text
    /// (the constraint is then unchanged).
    pub fn accept(&mut self, token: u32, tokenizer: &Tokenizer) -> bool {
        let mut next = self.prefix.clone();
        let fits =
            matches!(tokenizer.token_bytes(token, false), Ok(bytes) if !bytes.is_empty() && next.push_all(bytes));
        if fits {
            self.prefix = next;
        }
        fits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_tokenizer::{synthetic_bpe, EncodeOptions};

    #[test]
    fn masked_logits_leave_only_tokens_that_continue_the_object() {
        let tokenizer = Tokenizer::from_config(&synthetic_bpe(512)).expect("tokenizer");
        let mut constraint = JsonObject::new();
        let vocab = tokenizer.vocab_size();
        assert!(vocab > CANDIDATES, "the test covers the candidates and the rest");
        // Distinct logits (7919 is prime to the vocabulary's size): the
        // candidates are the tokens of the CANDIDATES largest.
        let logits: Vec<f32> = (0..vocab).map(|i| ((i * 7919) % vocab) as f32).collect();
        let mut masked = logits.clone();
        let allowed = constraint.mask(&mut masked, &tokenizer);
        let fits = |id: usize| {
            let bytes = tokenizer.token_bytes(id as u32, false).expect("token");
            !bytes.is_empty() && JsonPrefix::object().push_all(bytes)
        };
        let candidate = |id: usize| logits[id] >= (vocab - CANDIDATES) as f32;
        assert!(allowed > 0, "`{{` or a space can start the text");
        for (id, l) in masked.iter().enumerate() {
            assert_eq!(l.is_finite(), candidate(id) && fits(id), "token {id}");
        }
        // When no candidate fits, the rest are checked: the likeliest
        // tokens made ones that cannot start the text.
        let (misfits, fitting): (Vec<usize>, Vec<usize>) = (0..vocab).partition(|&id| !fits(id));
        assert!(misfits.len() >= CANDIDATES, "enough tokens cannot start an object");
        let mut rest_only = vec![0.0f32; vocab];
        misfits.iter().take(CANDIDATES).for_each(|&id| rest_only[id] = 10.0);
        assert_eq!(constraint.mask(&mut rest_only, &tokenizer), fitting.len());
        for (id, l) in rest_only.iter().enumerate() {
            assert_eq!(l.is_finite(), fits(id), "token {id}");
        }
        // A whole object, token by token, then nothing but the end.
        let text = r#"{"a": [1, 2]}"#;
        for id in tokenizer.encode(text, EncodeOptions::default()).expect("encode") {
            let bytes = tokenizer.token_bytes(id, false).expect("token");
            assert!(
                constraint.allows(id, &tokenizer),
                "{id} {:?} after {constraint:?}",
                String::from_utf8_lossy(bytes)
            );
            assert!(constraint.accept(id, &tokenizer));
        }
        assert!(constraint.is_complete());
        let x = tokenizer.encode("x", EncodeOptions::default()).expect("encode")[0];
        assert!(!constraint.accept(x, &tokenizer), "nothing may follow the object but space");
    }
}
