//! The error type of every fallible tokenizer operation.

/// What can go wrong when building a tokenizer or using it.
///
/// Every variant carries what a user needs to find the cause: the offending
/// value, its index in the GGUF array, and the bound it broke.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TokenizerError {
    /// The literal ranges given to
    /// [`Tokenizer::encode_around`](crate::Tokenizer::encode_around) are
    /// not sorted and disjoint byte ranges on character boundaries of the
    /// text.
    #[error("literal range {start}..{end} is unsorted, overlapping, off a character boundary or past the text's {len} bytes")]
    BadLiteralRanges {
        /// The range's start.
        start: usize,
        /// The range's end.
        end: usize,
        /// The text's length in bytes.
        len: usize,
    },
    /// `tokenizer.ggml.model` names a tokenizer this crate does not implement.
    #[error("unknown tokenizer model {model:?} (tokenizer.ggml.model); supported: {supported}")]
    UnknownModel {
        /// The value found.
        model: String,
        /// The supported values, comma separated.
        supported: &'static str,
    },
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement.
    #[error("unknown pre-tokenizer {pre:?} (tokenizer.ggml.pre); supported: {supported}")]
    UnknownPre {
        /// The value found.
        pre: String,
        /// The supported values, comma separated.
        supported: &'static str,
    },
    /// The vocabulary (`tokenizer.ggml.tokens`) is empty.
    #[error("the vocabulary (tokenizer.ggml.tokens) is empty")]
    EmptyVocab,
    /// An array that must have one entry per token has another length.
    #[error("{field} has {found} entries but the vocabulary has {expected} tokens")]
    LengthMismatch {
        /// The GGUF key of the array.
        field: &'static str,
        /// Its length.
        found: usize,
        /// The number of tokens.
        expected: usize,
    },
    /// A `tokenizer.ggml.token_type` entry is not one of 0..=6.
    #[error("tokenizer.ggml.token_type[{index}] = {value} is not a known token type (0..=6)")]
    InvalidTokenType {
        /// Index of the token.
        index: usize,
        /// The value found.
        value: i32,
    },
    /// A merge rule is not two tokens separated by one space.
    #[error("tokenizer.ggml.merges[{index}] = {merge:?} is not of the form \"left right\"")]
    MalformedMerge {
        /// Index of the merge rule.
        index: usize,
        /// The rule as found.
        merge: String,
    },
    /// A merge rule names a token (or produces one) that is not in the vocabulary.
    #[error("tokenizer.ggml.merges[{index}] = {merge:?} needs the token {token:?}, which is not in the vocabulary")]
    MergeTokenMissing {
        /// Index of the merge rule.
        index: usize,
        /// The rule as found.
        merge: String,
        /// The missing token text.
        token: String,
    },
    /// A GPT-2-style tokenizer needs merges (`tokenizer.ggml.merges`).
    #[error("model {model:?} needs tokenizer.ggml.merges, which is absent")]
    MissingMerges {
        /// The model type.
        model: String,
    },
    /// A vocabulary whose byte fallback needs all 256 `<0xXX>` tokens
    /// (`gemma4`) lacks some.
    #[error("tokenizer.ggml.tokens of a {model:?} model must hold the 256 byte tokens <0x00>..<0xFF>; {missing} are missing, the first <0x{first:02X}>")]
    MissingByteTokens {
        /// The model type.
        model: String,
        /// How many byte tokens are missing.
        missing: usize,
        /// The first missing byte.
        first: u8,
    },
    /// A special token id from the metadata is outside the vocabulary.
    #[error("{field} = {id} is outside the vocabulary of {vocab_size} tokens")]
    SpecialIdOutOfRange {
        /// The GGUF key.
        field: &'static str,
        /// The id found.
        id: u32,
        /// The number of tokens.
        vocab_size: usize,
    },
    /// A token id given to decode (or a lookup) is outside the vocabulary.
    #[error("token id {id} is outside the vocabulary of {vocab_size} tokens")]
    TokenIdOutOfRange {
        /// The id given.
        id: u32,
        /// The number of tokens.
        vocab_size: usize,
    },
    /// `add_bos`/`add_eos` is on but the matching token id is not set.
    #[error("{flag} is set but {field} is absent")]
    MissingSpecialToken {
        /// The flag that asks for the token.
        flag: &'static str,
        /// The GGUF key of the missing id.
        field: &'static str,
    },
    /// Text contains something the vocabulary cannot represent, and there is
    /// no unknown token to stand for it.
    #[error("cannot encode {text:?}: no vocabulary token, byte token or unknown token covers it")]
    Unencodable {
        /// The piece of text (a character or a byte, as text).
        text: String,
    },
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, TokenizerError>;
