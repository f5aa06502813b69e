//! `POST /v1/embeddings`: each input's final hidden states pooled
//! (`ServerOptions::pooling`: the mean over its tokens, or the last
//! token's, as llama-server's `--pooling`) and normalised to unit length.
//!
//! `input` is a string, a list of strings, a list of token ids or a list of
//! such lists (at most [`MAX_INPUTS`]); strings are tokenized as
//! completions' prompts are (BOS added when the model adds one) but with
//! special tokens' texts taken as text. `encoding_format` is `float` (a
//! list of numbers, the default) or `base64` (the little-endian f32 bytes,
//! which the official Python client asks for); `dimensions` is refused
//! unless it is the model's.
//! Each input is one pass of the engine (`Engine::embed_many`, which
//! queues a request's inputs together, in one place of the queue): it
//! rides the decode steps on a free sequence slot, so a running
//! generation's tokens are the same with or without embeddings beside it.

use axum::extract::State;
use axum::Json;
use baton_model::EncodeOptions;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::auth::Caller;
use super::body::JsonBody;
use super::error::ApiError;
use super::state::AppState;

/// Most inputs one request may embed.
pub const MAX_INPUTS: usize = 256;

/// `input`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum EmbeddingInput {
    /// One text.
    Text(String),
    /// Several texts.
    Texts(Vec<String>),
    /// One text's token ids.
    Tokens(Vec<u32>),
    /// Several texts' token ids.
    TokenLists(Vec<Vec<u32>>),
}

/// The request body.
#[derive(Debug, Clone, Deserialize)]
pub struct EmbeddingRequest {
    /// What to embed.
    pub input: EmbeddingInput,
    /// The model's name; absent or the served model's name.
    pub model: Option<String>,
    /// `float` (the default) or `base64`.
    pub encoding_format: Option<String>,
    /// Only the model's own width is served.
    pub dimensions: Option<u64>,
}

#[derive(Serialize)]
struct Embedding {
    object: &'static str,
    index: usize,
    embedding: Encoded,
}

/// An embedding as `encoding_format` asks.
#[derive(Serialize)]
#[serde(untagged)]
enum Encoded {
    Float(Vec<f32>),
    Base64(String),
}

/// Standard base64 (RFC 4648, padded) of `bytes`.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(chunk.get(1).copied().unwrap_or(0)) << 8)
            | u32::from(chunk.get(2).copied().unwrap_or(0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `POST /v1/embeddings`.
pub async fn embeddings(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(request): JsonBody<EmbeddingRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let info = state.engine.info().clone();
    super::params::check_model(request.model.as_deref(), &info.name, &state.model_aliases, state.strict_model_name)?;
    let as_base64 = match request.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::invalid_param(
                "encoding_format",
                format!("{other:?} is not an encoding: \"float\" or \"base64\""),
            ))
        }
    };
    if let Some(asked) = request.dimensions.filter(|&d| d != state.embedding_dim as u64) {
        return Err(ApiError::invalid_param(
            "dimensions",
            format!("{asked} dimensions asked: this model's embeddings have {}", state.embedding_dim),
        ));
    }
    let inputs = match request.input {
        EmbeddingInput::Text(text) => vec![Err(text)],
        EmbeddingInput::Texts(texts) => texts.into_iter().map(Err).collect(),
        EmbeddingInput::Tokens(ids) => vec![Ok(ids)],
        EmbeddingInput::TokenLists(lists) => lists.into_iter().map(Ok).collect(),
    };
    if inputs.is_empty() || inputs.len() > MAX_INPUTS {
        return Err(ApiError::invalid_param(
            "input",
            format!("1 to {MAX_INPUTS} inputs are served, not {}", inputs.len()),
        ));
    }
    // Tokenizing is CPU work: off the HTTP threads.
    let tokenizer = state.engine.tokenizer().clone();
    let token_lists = tokio::task::spawn_blocking(move || {
        inputs
            .into_iter()
            .map(|input| match input {
                Ok(ids) => Ok(ids),
                Err(text) => tokenizer.encode(&text, EncodeOptions { add_special: true, parse_special: false }),
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| ApiError::server(format!("tokenizing the input: {e}")))?
    .map_err(|e| ApiError::invalid_param("input", format!("tokenizing the input: {e}")))?;
    // Every input is queued before the first is waited for. The keys and
    // values an embedding leaves in its slot are its caller's prefix only.
    let scope = caller.cache_scope(&state.scope_seed, None)?;
    // The inputs are one request: one place in the queue, all admitted or
    // none.
    let tokens: usize = token_lists.iter().map(Vec::len).sum();
    let tickets = state.engine.embed_many(token_lists, state.pooling, scope)?;
    let mut data = Vec::with_capacity(tickets.len());
    for (index, mut ticket) in tickets.into_iter().enumerate() {
        let mut embedding = ticket.wait().await.map_err(ApiError::server)?;
        baton_model::normalize(&mut embedding);
        let embedding = if as_base64 {
            Encoded::Base64(base64(&embedding.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()))
        } else {
            Encoded::Float(embedding)
        };
        data.push(Embedding { object: "embedding", index, embedding });
    }
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "model": info.name,
        "usage": { "prompt_tokens": tokens, "total_tokens": tokens },
    })))
}

#[cfg(test)]
mod tests {
    use super::base64;

    #[test]
    fn base64_gives_rfc_4648s_test_vectors() {
        let vectors =
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE=")];
        for (plain, encoded) in vectors {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }
}
