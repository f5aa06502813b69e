//! The tokenizers' tests, one test binary (`--test it`): SentencePiece-style
//! and byte-level BPE, streaming decode, errors, and, behind
//! `reference-tests`, HF `tokenizers`, and behind `llama-reference-tests`,
//! llama.cpp (llama-cpp-python).

mod bpe;
mod errors;
mod literal;
mod llama_reference;
mod reference;
mod reference_json;
mod spm;
mod spm_bpe;
mod stream;
