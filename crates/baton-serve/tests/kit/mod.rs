//! Helpers the engine's test binaries share (`engine.rs`, `reference.rs`,
//! `it/`): a generation drained to its end, and the load options of a
//! paged cache. Each binary uses some of them.
#![allow(dead_code)]

use baton_model::{KvPool, LoadOptions};
use baton_serve::engine::{Event, Finish, Generation, TokenLogprobs};

/// Every token and log-probability entry of a generation, and how it
/// finished, blocking; a failed generation panics with its reason.
pub fn drain(mut generation: Generation) -> (Vec<u32>, Vec<TokenLogprobs>, Finish) {
    let (mut tokens, mut entries) = (Vec::new(), Vec::new());
    loop {
        match generation.blocking_next().expect("an event") {
            Event::Token(t) => tokens.push(t),
            Event::Logprobs(e) => entries.push(e),
            Event::Started { .. } | Event::Progress { .. } => {}
            Event::Done(finish) => return (tokens, entries, finish),
            Event::Failed(why) => panic!("{why}"),
        }
    }
}

/// `parallel` slots of 512 positions, steps of at most 64 tokens, over a
/// paged cache of `pool` blocks of 64 positions (`None`: a slot per
/// sequence).
pub fn paged(parallel: usize, pool: Option<usize>) -> LoadOptions {
    LoadOptions {
        context: Some(512),
        batch: 64,
        slots: parallel,
        kv_blocks: pool.is_some(),
        kv_pool: pool.map_or(KvPool::default(), KvPool::Blocks),
        ..LoadOptions::default()
    }
}
