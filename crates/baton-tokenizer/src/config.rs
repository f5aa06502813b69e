//! The plain tokenizer description that a model loader fills from GGUF keys.

use crate::error::{Result, TokenizerError};

/// Everything needed to build a [`Tokenizer`](crate::Tokenizer), as stored in
/// a GGUF file's `tokenizer.ggml.*` metadata.
///
/// This crate reads no files: the model crate copies the GGUF values into this
/// struct. Absent keys are `None` and take the defaults documented per field.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenizerConfig {
    /// `tokenizer.ggml.model`: `"llama"` (SentencePiece-style, merges by
    /// score), `"gpt2"` (byte-level BPE, merges by rank) or `"gemma4"`
    /// (SentencePiece-style BPE: `▁` for spaces, merges by rank over whole
    /// characters, `<0xXX>` byte fallback).
    pub model: String,
    /// `tokenizer.ggml.pre`: the pre-tokenizer of a `gpt2` model (`default`,
    /// `gpt-2`, `llama-bpe`, `qwen2`, `smollm`); absent means `default`.
    /// Ignored by `llama` and `gemma4` models, which do not pre-split text
    /// by pattern.
    pub pre: Option<String>,
    /// `tokenizer.ggml.tokens`: the token texts; the index is the token id.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.scores`: merge priority of each token (higher merges
    /// first). Used by `llama` models; absent means all zero.
    pub scores: Option<Vec<f32>>,
    /// `tokenizer.ggml.token_type`: 1 normal, 2 unknown, 3 control,
    /// 4 user-defined, 5 unused, 6 byte (0, undefined, counts as normal).
    /// Absent means every token is normal.
    pub token_types: Option<Vec<i32>>,
    /// `tokenizer.ggml.merges`: BPE merge rules `"left right"`, best first.
    /// Required by `gpt2` and `gemma4` models.
    pub merges: Option<Vec<String>>,
    /// `tokenizer.ggml.bos_token_id`: beginning-of-sequence token.
    pub bos_id: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`: end-of-sequence token.
    pub eos_id: Option<u32>,
    /// `tokenizer.ggml.unknown_token_id`: token for text the vocabulary
    /// cannot represent otherwise.
    pub unk_id: Option<u32>,
    /// `tokenizer.ggml.padding_token_id`: padding token (informational).
    pub pad_id: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`: prepend BOS when encoding with
    /// `add_special`. Default: true for `llama`, false for `gpt2`; always
    /// true for `gemma4`, whatever the file says, as llama.cpp does (Gemma
    /// 4 was trained with BOS at every sequence's start).
    pub add_bos: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`: append EOS when encoding with
    /// `add_special`. Default: false.
    pub add_eos: Option<bool>,
    /// `tokenizer.ggml.add_space_prefix`: prepend a space to the text (and to
    /// text that follows a special token) before SentencePiece encoding.
    /// Default: true for `llama`; ignored by `gpt2` and `gemma4` models.
    pub add_space_prefix: Option<bool>,
}

/// The tokenizer algorithm named by `tokenizer.ggml.model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    /// `llama`: SentencePiece-style, symbols merged by best token score, byte
    /// fallback through `<0xXX>` tokens.
    SentencePiece,
    /// `gpt2`: byte-level BPE, merges by rank, regex-like pre-tokenizer.
    BytePairEncoding,
    /// `gemma4`: SentencePiece-style BPE. Spaces become `▁`, text is split
    /// only into runs of newlines and runs of other characters, merges by
    /// rank over whole characters, `<0xXX>` byte fallback.
    SentencePieceBpe,
}

/// Values of `tokenizer.ggml.model` this crate supports.
pub const SUPPORTED_MODELS: &str = "llama, gpt2, gemma4";

impl ModelKind {
    /// Parses `tokenizer.ggml.model`.
    pub fn from_gguf_name(model: &str) -> Result<Self> {
        match model {
            "llama" => Ok(Self::SentencePiece),
            "gpt2" => Ok(Self::BytePairEncoding),
            "gemma4" => Ok(Self::SentencePieceBpe),
            _ => Err(TokenizerError::UnknownModel { model: model.to_owned(), supported: SUPPORTED_MODELS }),
        }
    }
}

/// The role of a token (`tokenizer.ggml.token_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenType {
    /// 1 (or 0, undefined): ordinary text.
    Normal,
    /// 2: stands for text the vocabulary cannot represent.
    Unknown,
    /// 3: control token (BOS, EOS, chat markers); parsed from text only when
    /// asked, rendered only when asked.
    Control,
    /// 4: user-defined token, always matched verbatim in text.
    UserDefined,
    /// 5: unused slot; never produced by encoding.
    Unused,
    /// 6: one raw byte, written `<0xXX>` (SentencePiece byte fallback).
    Byte,
}

impl TokenType {
    /// Parses one `tokenizer.ggml.token_type` entry; `index` is for the error.
    pub fn from_gguf(value: i32, index: usize) -> Result<Self> {
        match value {
            0 | 1 => Ok(Self::Normal),
            2 => Ok(Self::Unknown),
            3 => Ok(Self::Control),
            4 => Ok(Self::UserDefined),
            5 => Ok(Self::Unused),
            6 => Ok(Self::Byte),
            _ => Err(TokenizerError::InvalidTokenType { index, value }),
        }
    }

    /// The GGUF value of this type.
    pub fn to_gguf(self) -> i32 {
        match self {
            Self::Normal => 1,
            Self::Unknown => 2,
            Self::Control => 3,
            Self::UserDefined => 4,
            Self::Unused => 5,
            Self::Byte => 6,
        }
    }

    /// Whether the token is matched verbatim in text before pre-tokenization
    /// (user-defined always, control only when special parsing is on).
    pub fn is_special(self) -> bool {
        matches!(self, Self::Control | Self::UserDefined)
    }
}
