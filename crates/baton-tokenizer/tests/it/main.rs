//! The tokenizers' tests, one test binary (`--test it`): SentencePiece-style
//! and byte-level BPE, streaming decode, errors, and, behind
//! `reference-tests`, HF `tokenizers`.

mod bpe;
mod errors;
mod literal;
mod reference;
mod spm;
mod stream;
