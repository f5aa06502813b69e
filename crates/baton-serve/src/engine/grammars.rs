//! The model's vocabulary as the grammar engine reads it, built on the
//! first request that holds its text to a format (over a second for a
//! vocabulary of 256k tokens: no model load waits for it).

use std::sync::{Arc, OnceLock};

use baton_gen::constraint::{GrammarError, GrammarVocabulary};
use baton_model::Tokenizer;

/// The vocabulary grammars compile against, or why there is none; clones
/// share it.
#[derive(Clone)]
pub struct Grammars {
    tokenizer: Arc<Tokenizer>,
    built: Arc<OnceLock<Result<Arc<GrammarVocabulary>, GrammarError>>>,
}

impl Grammars {
    /// The vocabulary of `tokenizer`, to build when first asked for.
    pub fn new(tokenizer: Arc<Tokenizer>) -> Grammars {
        Grammars { tokenizer, built: Arc::new(OnceLock::new()) }
    }

    /// The vocabulary (built now if it was not), or why it cannot be.
    pub fn vocabulary(&self) -> Result<&Arc<GrammarVocabulary>, &GrammarError> {
        self.built.get_or_init(|| GrammarVocabulary::new(&self.tokenizer).map(Arc::new)).as_ref()
    }
}

impl std::fmt::Debug for Grammars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grammars").field("built", &self.built.get()).finish_non_exhaustive()
    }
}
