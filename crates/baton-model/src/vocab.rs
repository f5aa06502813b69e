//! The tokenizer of a GGUF model, from its `tokenizer.ggml.*` metadata.

use baton_gguf::{GgufFile, OptionalKey};
use baton_tokenizer::{Tokenizer, TokenizerConfig};

use crate::error::ModelError;

/// Builds the tokenizer config from a file's metadata.
pub fn tokenizer_config_from_gguf(file: &GgufFile) -> Result<TokenizerConfig, ModelError> {
    let meta = file.metadata();
    let id = |key: &str| -> Result<Option<u32>, ModelError> { Ok(meta.get_u32(key).optional()?) };
    Ok(TokenizerConfig {
        model: meta.get_str("tokenizer.ggml.model")?.to_string(),
        pre: meta.get_str("tokenizer.ggml.pre").optional()?.map(str::to_string),
        tokens: meta.get_str_array("tokenizer.ggml.tokens")?.to_vec(),
        scores: meta.get_f32_array("tokenizer.ggml.scores").optional()?.map(|s| s.into_owned()),
        token_types: meta.get_i32_array("tokenizer.ggml.token_type").optional()?.map(|s| s.into_owned()),
        merges: meta.get_str_array("tokenizer.ggml.merges").optional()?.map(<[String]>::to_vec),
        bos_id: id("tokenizer.ggml.bos_token_id")?,
        eos_id: id("tokenizer.ggml.eos_token_id")?,
        unk_id: id("tokenizer.ggml.unknown_token_id")?,
        pad_id: id("tokenizer.ggml.padding_token_id")?,
        add_bos: meta.get_bool("tokenizer.ggml.add_bos_token").optional()?,
        add_eos: meta.get_bool("tokenizer.ggml.add_eos_token").optional()?,
        add_space_prefix: meta.get_bool("tokenizer.ggml.add_space_prefix").optional()?,
    })
}

/// Builds the tokenizer of a file.
pub fn tokenizer_from_gguf(file: &GgufFile) -> Result<Tokenizer, ModelError> {
    Ok(Tokenizer::from_config(&tokenizer_config_from_gguf(file)?)?)
}
