//! Perplexity as llama.cpp's perplexity tool computes it.

use baton_model::Logits;
use baton_model::Model;
use baton_model::ModelError;
use baton_tokenizer::EncodeOptions;

/// What to score.
#[derive(Clone, Copy, Debug)]
pub struct PerplexityOptions {
    /// Tokens per chunk (`-c`).
    pub context: usize,
    /// Most chunks to score (`--chunks`); `None` = every whole chunk.
    pub chunks: Option<usize>,
}

/// The result.
#[derive(Clone, Debug, PartialEq)]
pub struct PerplexityResult {
    /// `exp(nll_mean)`.
    pub ppl: f64,
    /// Mean negative log-likelihood per scored token.
    pub nll_mean: f64,
    /// Chunks scored.
    pub chunks: usize,
    /// Tokens scored.
    pub tokens_scored: usize,
}

/// `-log softmax(logits)[target]`, in f64.
pub fn nll(logits: &[f32], target: usize) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    -(logits[target] as f64 - max - sum.ln())
}

/// Scores `text`; `progress(chunk, running_ppl)` after each chunk.
///
/// Perplexity as llama.cpp's perplexity tool computes it.
///
/// The text is tokenized once (with BOS only when the model's metadata asks
/// for it) and cut into whole chunks of `context` tokens. Each chunk is
/// evaluated from an empty cache (its first token replaced by BOS when the
/// model adds BOS), and the negative log-likelihood is averaged over the
/// second half of each chunk: for positions `i` from `context/2` to
/// `context-2`, the probability position `i` gives to token `i+1`.
pub fn perplexity(
    model: &mut Model,
    text: &str,
    options: &PerplexityOptions,
    progress: &mut dyn FnMut(usize, f64),
) -> Result<PerplexityResult, ModelError> {
    let ctx = options.context;
    if ctx < 4 || ctx > model.context() {
        return Err(ModelError::Input(format!(
            "chunks of {ctx} tokens need 4 <= ctx <= the context {}",
            model.context()
        )));
    }
    let tokenizer = model.shared_tokenizer();
    let tokens = tokenizer.encode(text, EncodeOptions { add_special: true, parse_special: false })?;
    let available = tokens.len() / ctx;
    let n_chunks = options.chunks.map_or(available, |c| c.min(available));
    if n_chunks == 0 {
        return Err(ModelError::Input(format!("the text has {} tokens, fewer than one chunk of {ctx}", tokens.len())));
    }
    let bos = if tokenizer.adds_bos() { tokenizer.bos_id() } else { None };
    let vocab = model.config().vocab;
    let first = ctx / 2;
    let batch = model.batch();
    let (mut nll_sum, mut count) = (0f64, 0usize);
    let mut chunk_tokens = Vec::with_capacity(ctx);
    for c in 0..n_chunks {
        chunk_tokens.clear();
        chunk_tokens.extend_from_slice(&tokens[c * ctx..(c + 1) * ctx]);
        if let Some(b) = bos {
            chunk_tokens[0] = b;
        }
        for start in (0..ctx).step_by(batch) {
            let end = (start + batch).min(ctx);
            let logits = model.eval(&chunk_tokens[start..end], start, Logits::All)?;
            for i in start.max(first)..end.min(ctx - 1) {
                let row = &logits[(i - start) * vocab..(i - start + 1) * vocab];
                nll_sum += nll(row, chunk_tokens[i + 1] as usize);
                count += 1;
            }
        }
        progress(c + 1, (nll_sum / count as f64).exp());
    }
    let nll_mean = nll_sum / count as f64;
    Ok(PerplexityResult { ppl: nll_mean.exp(), nll_mean, chunks: n_chunks, tokens_scored: count })
}

#[cfg(test)]
mod tests {
    use super::nll;

    #[test]
    fn nll_is_minus_log_softmax() {
        let logits = [1.0f32, 2.0, 3.0];
        let z: f64 = [1f64, 2.0, 3.0].iter().map(|v| v.exp()).sum();
        assert!((nll(&logits, 2) - (-(3f64.exp() / z).ln())).abs() < 1e-12);
        assert!((nll(&[0.0; 4], 1) - 4f64.ln()).abs() < 1e-12);
    }
}
