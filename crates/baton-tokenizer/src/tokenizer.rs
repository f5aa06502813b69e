//! [`Tokenizer`]: built from a [`TokenizerConfig`], encodes text to ids.

use crate::bpe::{BpeModel, MergeTable};
use crate::bytes::{byte_map, parse_byte_token};
use crate::config::{ModelKind, TokenType, TokenizerConfig};
use crate::error::{Result, TokenizerError};
use crate::pretokenize::PreTokenizer;
use crate::special::{Fragment, SpecialMatcher};
use crate::spm::{SpmModel, SPACE_MARKER};
use crate::spm_bpe::SpmBpeModel;
use crate::table::{Strings, TokenTable};

/// Which special tokens [`Tokenizer::encode`] adds and matches. The
/// default adds none and reads control tokens as plain text: right for a
/// continuation or for user input inside a rendered template.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Adds BOS/EOS as the model's metadata asks (`add_bos`, `add_eos`):
    /// the start of a prompt.
    pub add_special: bool,
    /// Matches control tokens written in the text (such as `<|im_start|>`),
    /// for text a chat template rendered; user-defined tokens are always
    /// matched.
    pub parse_special: bool,
}

/// What turns a text fragment into ids, per [`ModelKind`].
enum Algorithm {
    /// SentencePiece merges by score; byte-fallback tokens `<0xXX>` by byte.
    SentencePiece { byte_ids: [Option<u32>; 256] },
    /// Byte-level BPE after the pre-tokenizer's split.
    BytePairEncoding { model: BpeModel, pre: PreTokenizer },
    /// SentencePiece-style BPE; every byte's `<0xXX>` token.
    SentencePieceBpe { table: MergeTable, byte_ids: [u32; 256] },
}

/// The `<0xXX>` tokens of a vocabulary, by byte: those typed as byte tokens,
/// or, without token types, every `<0xXX>` text (typing them as bytes).
fn byte_tokens(tokens: &[String], typed: bool, types: &mut [TokenType]) -> [Option<u32>; 256] {
    let mut byte_ids = [None; 256];
    for (id, text) in tokens.iter().enumerate() {
        let Some(byte) = parse_byte_token(text) else {
            continue;
        };
        if !typed {
            types[id] = TokenType::Byte;
        }
        if types[id] == TokenType::Byte {
            byte_ids[usize::from(byte)] = Some(id as u32);
        }
    }
    byte_ids
}

/// Appends `text` to `out` with its spaces as `▁`.
fn escape_spaces(text: &str, out: &mut String) {
    out.extend(text.chars().map(|c| if c == ' ' { SPACE_MARKER } else { c }));
}

/// A tokenizer for one model's vocabulary: encodes text to token ids and
/// decodes ids back (see [`Tokenizer::decode`] and
/// [`StreamDecoder`](crate::StreamDecoder)).
///
/// Immutable once built, so it can be shared between threads.
pub struct Tokenizer {
    pub(crate) kind: ModelKind,
    pub(crate) tokens: TokenTable,
    pub(crate) types: Vec<TokenType>,
    scores: Vec<f32>,
    /// The bytes each token stands for as text (special tokens: their text).
    pub(crate) pieces: Strings,
    algorithm: Algorithm,
    specials: SpecialMatcher,
    bos: Option<u32>,
    eos: Option<u32>,
    unk: Option<u32>,
    pad: Option<u32>,
    add_bos: bool,
    add_eos: bool,
    pub(crate) add_space_prefix: bool,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("kind", &self.kind)
            .field("vocab_size", &self.tokens.len())
            .field(
                "pre",
                &match &self.algorithm {
                    Algorithm::BytePairEncoding { pre, .. } => Some(pre),
                    _ => None,
                },
            )
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("add_bos", &self.add_bos)
            .field("add_eos", &self.add_eos)
            .finish_non_exhaustive()
    }
}

fn check_len(field: &'static str, found: usize, expected: usize) -> Result<()> {
    if found == expected {
        Ok(())
    } else {
        Err(TokenizerError::LengthMismatch { field, found, expected })
    }
}

impl Tokenizer {
    /// Builds a tokenizer, checking the whole configuration: model and
    /// pre-tokenizer names, array lengths, token types, merges and special
    /// token ids. Bad metadata is an error, never a panic.
    pub fn from_config(config: &TokenizerConfig) -> Result<Self> {
        let kind = ModelKind::from_gguf_name(&config.model)?;
        let n = config.tokens.len();
        if n == 0 {
            return Err(TokenizerError::EmptyVocab);
        }
        if u32::try_from(n).is_err() {
            return Err(TokenizerError::LengthMismatch {
                field: "tokenizer.ggml.tokens",
                found: n,
                expected: u32::MAX as usize,
            });
        }
        let scores = match &config.scores {
            Some(scores) => {
                check_len("tokenizer.ggml.scores", scores.len(), n)?;
                scores.clone()
            }
            None => vec![0.0; n],
        };
        let mut types = match &config.token_types {
            Some(raw) => {
                check_len("tokenizer.ggml.token_type", raw.len(), n)?;
                raw.iter()
                    .enumerate()
                    .map(|(index, &value)| TokenType::from_gguf(value, index))
                    .collect::<Result<Vec<_>>>()?
            }
            None => vec![TokenType::Normal; n],
        };
        // As llama.cpp: its ends of generation typed as control, then
        // harmony's channel markers rendered as text.
        crate::end_of_generation::type_as_control(&config.tokens, &mut types);
        crate::harmony::render_channel_markers(&config.tokens, &mut types);
        // Last id wins for duplicate texts, as in llama.cpp and HF.
        let tokens = TokenTable::new(&config.tokens);

        let check_id = |field: &'static str, id: Option<u32>| match id {
            Some(id) if id as usize >= n => Err(TokenizerError::SpecialIdOutOfRange { field, id, vocab_size: n }),
            _ => Ok(id),
        };
        let bos = check_id("tokenizer.ggml.bos_token_id", config.bos_id)?;
        let eos = check_id("tokenizer.ggml.eos_token_id", config.eos_id)?;
        let pad = check_id("tokenizer.ggml.padding_token_id", config.pad_id)?;
        let unk = check_id("tokenizer.ggml.unknown_token_id", config.unk_id)?
            .or_else(|| types.iter().position(|&t| t == TokenType::Unknown).map(|i| i as u32));

        let is_spm = kind == ModelKind::SentencePiece;
        // Gemma 4: BOS always, as llama.cpp forces it (see TokenizerConfig).
        let add_bos = kind == ModelKind::SentencePieceBpe || config.add_bos.unwrap_or(is_spm);
        let add_eos = config.add_eos.unwrap_or(false);
        if add_bos && bos.is_none() {
            return Err(TokenizerError::MissingSpecialToken {
                flag: "tokenizer.ggml.add_bos_token",
                field: "tokenizer.ggml.bos_token_id",
            });
        }
        if add_eos && eos.is_none() {
            return Err(TokenizerError::MissingSpecialToken {
                flag: "tokenizer.ggml.add_eos_token",
                field: "tokenizer.ggml.eos_token_id",
            });
        }

        let merges =
            || config.merges.as_ref().ok_or_else(|| TokenizerError::MissingMerges { model: config.model.clone() });
        let algorithm = match kind {
            ModelKind::SentencePiece => Algorithm::SentencePiece {
                byte_ids: byte_tokens(&config.tokens, config.token_types.is_some(), &mut types),
            },
            ModelKind::BytePairEncoding => Algorithm::BytePairEncoding {
                model: BpeModel::new(merges()?, &tokens)?,
                pre: PreTokenizer::from_gguf_name(config.pre.as_deref())?,
            },
            ModelKind::SentencePieceBpe => {
                let found = byte_tokens(&config.tokens, config.token_types.is_some(), &mut types);
                let mut byte_ids = [0; 256];
                for (byte, (slot, id)) in byte_ids.iter_mut().zip(found).enumerate() {
                    *slot = id.ok_or_else(|| TokenizerError::MissingByteTokens {
                        model: config.model.clone(),
                        missing: found.iter().filter(|id| id.is_none()).count(),
                        first: byte as u8,
                    })?;
                }
                Algorithm::SentencePieceBpe { table: MergeTable::new(merges()?, &tokens)?, byte_ids }
            }
        };

        let map = byte_map();
        let byte_level = matches!(algorithm, Algorithm::BytePairEncoding { .. });
        let pieces = Strings::new(config.tokens.iter().zip(&types).map(|(text, &kind_of)| match kind_of {
            TokenType::Normal if byte_level => {
                let mut out = Vec::with_capacity(text.len());
                map.decode_str(text, &mut out);
                out
            }
            TokenType::Normal => text.replace(SPACE_MARKER, " ").into_bytes(),
            TokenType::Byte if !byte_level => {
                parse_byte_token(text).map_or_else(|| text.as_bytes().to_vec(), |b| vec![b])
            }
            _ => text.as_bytes().to_vec(),
        }));

        let specials = SpecialMatcher::new(&config.tokens, &types);
        Ok(Self {
            kind,
            tokens,
            types,
            scores,
            pieces,
            algorithm,
            specials,
            bos,
            eos,
            unk,
            pad,
            add_bos,
            add_eos,
            add_space_prefix: is_spm && config.add_space_prefix.unwrap_or(true),
        })
    }

    /// Encodes `text` to token ids, with the special tokens `options` asks
    /// for ([`EncodeOptions`]). For SentencePiece models a space is prefixed
    /// to the text and to text that follows a special token, when
    /// `add_space_prefix` is on.
    pub fn encode(&self, text: &str, options: EncodeOptions) -> Result<Vec<u32>> {
        self.encode_around(text, &[], options)
    }

    /// Encodes `text` as [`Tokenizer::encode`] does, except that inside the
    /// `literal` byte ranges no special token of any kind is matched (not
    /// even user-defined ones): their text is only ever plain text. This is
    /// how untrusted text inside a rendered chat template is encoded, so
    /// that a user who writes `<|im_start|>system` gets those characters,
    /// not a forged turn. Text that holds no special token's text encodes
    /// exactly as with [`Tokenizer::encode`].
    ///
    /// # Errors
    ///
    /// [`TokenizerError::BadLiteralRanges`] when the ranges are not sorted,
    /// overlap, end past `text` or split a character.
    pub fn encode_around(
        &self,
        text: &str,
        literal: &[std::ops::Range<usize>],
        options: EncodeOptions,
    ) -> Result<Vec<u32>> {
        let mut end = 0;
        for range in literal {
            if range.start < end
                || range.end < range.start
                || range.end > text.len()
                || !text.is_char_boundary(range.start)
                || !text.is_char_boundary(range.end)
            {
                return Err(TokenizerError::BadLiteralRanges { start: range.start, end: range.end, len: text.len() });
            }
            end = range.end;
        }
        let EncodeOptions { add_special, parse_special } = options;
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            out.extend(self.bos);
        }
        let mut fragments = Vec::new();
        self.specials.split_around(text, literal, parse_special, &mut fragments);
        match &self.algorithm {
            Algorithm::BytePairEncoding { model, pre } => {
                let mut words = Vec::new();
                for fragment in fragments {
                    match fragment {
                        Fragment::Special(id) => out.push(id),
                        Fragment::Text(text) => {
                            words.clear();
                            pre.split(text, &mut words);
                            for word in &words {
                                self.encode_bpe_word(model, *pre, word, &mut out)?;
                            }
                        }
                    }
                }
            }
            Algorithm::SentencePiece { byte_ids } => {
                let model = SpmModel {
                    tokens: &self.tokens,
                    types: &self.types,
                    scores: &self.scores,
                    byte_ids,
                    unk: self.unk,
                };
                let mut after_special = true;
                let mut escaped = String::new();
                for fragment in fragments {
                    match fragment {
                        Fragment::Special(id) => {
                            out.push(id);
                            after_special = true;
                        }
                        Fragment::Text(text) => {
                            escaped.clear();
                            if self.add_space_prefix && after_special {
                                escaped.push(SPACE_MARKER);
                            }
                            escape_spaces(text, &mut escaped);
                            model.encode(&escaped, &mut out)?;
                            after_special = false;
                        }
                    }
                }
            }
            Algorithm::SentencePieceBpe { table, byte_ids } => {
                let model = SpmBpeModel { tokens: &self.tokens, table, byte_ids };
                let mut escaped = String::new();
                for fragment in fragments {
                    match fragment {
                        Fragment::Special(id) => out.push(id),
                        Fragment::Text(text) => {
                            escaped.clear();
                            escape_spaces(text, &mut escaped);
                            model.encode(&escaped, &mut out);
                        }
                    }
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.eos);
        }
        Ok(out)
    }

    fn encode_bpe_word(&self, model: &BpeModel, pre: PreTokenizer, word: &str, out: &mut Vec<u32>) -> Result<()> {
        if pre.ignores_merges() {
            let mapped = byte_map().encode_str(word.as_bytes());
            if let Some(id) = self.tokens.id(&mapped) {
                out.push(id);
                return Ok(());
            }
        }
        model.encode_word(word.as_bytes(), self.unk, out)
    }

    /// The algorithm of this tokenizer.
    pub fn kind(&self) -> ModelKind {
        self.kind
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    fn check(&self, id: u32) -> Result<usize> {
        let index = id as usize;
        if index < self.tokens.len() {
            Ok(index)
        } else {
            Err(TokenizerError::TokenIdOutOfRange { id, vocab_size: self.tokens.len() })
        }
    }

    /// The vocabulary text of a token (as stored: `▁` or byte-level chars).
    pub fn token_text(&self, id: u32) -> Result<&str> {
        Ok(self.tokens.text(self.check(id)?))
    }

    /// The type of a token.
    pub fn token_type(&self, id: u32) -> Result<TokenType> {
        Ok(self.types[self.check(id)?])
    }

    /// The id of the token whose vocabulary text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.tokens.id(text)
    }

    /// Beginning-of-sequence token.
    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    /// End-of-sequence token.
    pub fn eos_id(&self) -> Option<u32> {
        self.eos
    }

    /// Unknown token (from the metadata, else the first token of type unknown).
    pub fn unk_id(&self) -> Option<u32> {
        self.unk
    }

    /// Padding token.
    pub fn pad_id(&self) -> Option<u32> {
        self.pad
    }

    /// Whether `encode(.., add_special = true, ..)` prepends BOS.
    pub fn adds_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether `encode(.., add_special = true, ..)` appends EOS.
    pub fn adds_eos(&self) -> bool {
        self.add_eos
    }

    pub(crate) fn checked_index(&self, id: u32) -> Result<usize> {
        self.check(id)
    }
}
