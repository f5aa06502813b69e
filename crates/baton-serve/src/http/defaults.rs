//! The server's defaults for what a request leaves out: llama-server's
//! `--temp`, `--seed` and `-n`/`--n-predict`, which scripts and test
//! suites written for it pass when they start the server.

use super::types::Params;

/// Values a request takes when it gives none of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RequestDefaults {
    /// Sampling temperature (`--temp`).
    pub temperature: Option<f32>,
    /// Seed of the draw (`--seed`); without it each request draws a fresh one.
    pub seed: Option<u64>,
    /// Most tokens an answer generates (`-n`), cut to what the context
    /// leaves after the prompt; without it, the context's end.
    pub max_tokens: Option<usize>,
}

impl RequestDefaults {
    /// `params` with the defaults in place of the sampling values it
    /// leaves out.
    pub(super) fn sampling(&self, params: &Params) -> Params {
        let mut filled = params.clone();
        filled.temperature = filled.temperature.or(self.temperature);
        filled.seed = filled.seed.or(self.seed);
        filled
    }

    /// The most tokens of an answer to a `prompt`-token prompt whose
    /// request gave none (`None`: no default, or no room left).
    pub(super) fn max_tokens(&self, params: &Params, prompt: usize, context: usize) -> Option<usize> {
        if params.max_tokens.or(params.max_completion_tokens).is_some() {
            return None;
        }
        self.max_tokens.map(|n| n.min(context.saturating_sub(prompt))).filter(|&n| n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requests_own_values_win_and_the_default_fits_the_context() {
        let defaults = RequestDefaults { temperature: Some(0.5), seed: Some(42), max_tokens: Some(64) };
        let given: Params = serde_json::from_str(r#"{"temperature": 1.0, "max_tokens": 3}"#).expect("params");
        let filled = defaults.sampling(&given);
        assert_eq!((filled.temperature, filled.seed), (Some(1.0), Some(42)));
        assert_eq!(defaults.max_tokens(&given, 10, 100), None, "the request's max_tokens stands");
        let none = Params::default();
        assert_eq!(defaults.max_tokens(&none, 10, 100), Some(64));
        assert_eq!(defaults.max_tokens(&none, 90, 100), Some(10), "cut to the room left");
        assert_eq!(defaults.max_tokens(&none, 100, 100), None);
        assert_eq!(RequestDefaults::default().max_tokens(&none, 10, 100), None);
    }
}
