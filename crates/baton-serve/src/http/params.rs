//! A request's parameters checked and turned into an engine request.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;

use baton_gen::speculative::{SpecParams, SpecType};
use baton_gen::{LogitBias, SamplingParams};
use serde_json::Value;

use super::error::ApiError;
use super::tools::ToolMode;
use super::types::{Params, Stop};
use baton_gen::constraint::GrammarSource;

use crate::engine::{GenerateRequest, Grammars, ModelInfo, OutputFormat, MAX_TOP_LOGPROBS};

/// Most stop strings a request may give.
pub const MAX_STOPS: usize = 16;

/// Most choices (`n`) a request may ask for.
pub const MAX_CHOICES: u64 = 16;

/// A checked request: what the engine runs and what the server matches.
#[derive(Debug, Clone)]
pub struct Job {
    /// The engine's request.
    pub request: GenerateRequest,
    /// Stop strings, none empty.
    pub stops: Vec<String>,
    /// Stream server-sent events.
    pub stream: bool,
    /// Send the `usage` chunk at the end of a stream.
    pub include_usage: bool,
    /// The answer may be a tool call (chat with `tools`).
    pub tools: Option<ToolMode>,
    /// The tools that may be called, each its name and parameters' schema
    /// (what types the values of a call in the XML form).
    pub tool_schemas: Arc<Vec<(String, Value)>>,
    /// Choices to generate (`n`, 1 to [`MAX_CHOICES`]).
    pub choices: usize,
    /// Split the thinking from the answer into `reasoning_content`
    /// (chat); `Some(true)` when the prompt opened the thinking.
    pub reasoning: Option<bool>,
    /// `speculative.type`, `speculative.n_max` and `speculative.n_min`,
    /// when given.
    pub drafts: (Option<SpecType>, Option<usize>, Option<usize>),
    /// What llama-server's answers add when asked ([`Extras`]).
    pub extras: Extras,
}

/// What llama-server's answers add to OpenAI's when the request asks.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extras {
    /// `timings` on a stream's chunks after the first.
    pub timings_per_token: bool,
    /// `prompt_progress` chunks in a stream.
    pub return_progress: bool,
    /// `__verbose` on a whole answer.
    pub verbose: bool,
}

impl Job {
    /// The stop strings that apply to the answer: none when its whole
    /// text is held to a format (a JSON object, a schema, a required tool
    /// call), so that a schema-held answer is never cut into text the
    /// schema refuses; the format itself ends it.
    pub fn applied_stops(&self) -> Vec<String> {
        match self.request.format.holds_whole_text() {
            false => self.stops.clone(),
            true => Vec::new(),
        }
    }

    /// Checks `params` against the served model and builds the engine
    /// request for `prompt`.
    pub fn new(params: &Params, prompt: Vec<u32>, info: &ModelInfo) -> Result<Job, ApiError> {
        let choices = match params.n.unwrap_or(1) {
            n @ 1..=MAX_CHOICES => n as usize,
            n => return Err(ApiError::invalid_param("n", format!("n = {n}: 1 to {MAX_CHOICES} choices are served"))),
        };
        let logprobs = logprobs(params)?;
        let stops = stops(params.stop.clone())?;
        let max_tokens = params.max_completion_tokens.or(params.max_tokens);
        let max_tokens = max_tokens
            .map(|n| usize::try_from(n).map_err(|_| ApiError::invalid_param("max_tokens", "max_tokens is too large")))
            .transpose()?;
        let request = GenerateRequest {
            prompt,
            max_tokens,
            sampling: sampling(params, info)?,
            stop_at_eog: !params.ignore_eos,
            logprobs,
            post_sampling: false,
            format: format(params, &info.grammars)?,
            // The caller's and its `cache_salt`'s: set by the handler
            // (`AppState::job`), which knows who sent it.
            cache_scope: Default::default(),
        };
        let include_usage = params.stream_options.as_ref().is_some_and(|o| o.include_usage);
        if include_usage && !params.stream {
            // As OpenAI: a whole answer has its usage anyway.
            return Err(ApiError::invalid_param("stream_options", "include_usage is only served with stream: true"));
        }
        let count = |n: Option<u64>| n.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        let kind = match params.speculative_type.as_deref() {
            None => None,
            Some(name) => Some(SpecType::from_name(name).ok_or_else(|| {
                let names: Vec<&str> = SpecType::ALL.iter().map(|t| t.name()).collect();
                ApiError::invalid_param(
                    "speculative.type",
                    format!("speculative.type {name:?}: the types are {}", names.join(", ")),
                )
            })?),
        };
        let drafts = (kind, count(params.speculative_n_max), count(params.speculative_n_min));
        let extras = Extras {
            timings_per_token: params.timings_per_token,
            return_progress: params.return_progress,
            verbose: params.verbose,
        };
        let stream = params.stream;
        Ok(Job {
            request,
            stops,
            stream,
            include_usage,
            tools: None,
            tool_schemas: Arc::default(),
            choices,
            reasoning: None,
            drafts,
            extras,
        })
    }

    /// How it drafts: as `server` (the server's `--spec-type`) says, with
    /// the request's `speculative.type`, `n_max` and `n_min` in place of
    /// the server's when given (an `n_max` above 0 turns drafting on: the
    /// server's type, n-grams when the server drafts by none; 0 turns it
    /// off); `None` when the request gives none of them.
    pub fn spec(&self, server: SpecParams) -> Option<SpecParams> {
        let (kind, n_max, n_min) = self.drafts;
        if kind.is_none() && n_max.is_none() && n_min.is_none() {
            return None;
        }
        let mut spec = server;
        if let Some(kind) = kind {
            spec.kind = kind;
        }
        if let Some(n_max) = n_max {
            spec.draft_max = n_max;
            spec.kind = match (n_max, spec.kind) {
                (0, _) => SpecType::None,
                (_, SpecType::None) => SpecType::Ngram,
                (_, kind) => kind,
            };
        }
        spec.draft_min = n_min.unwrap_or(spec.draft_min);
        Some(spec)
    }
}

/// Checks a request's `model` against the served one: any name is
/// served (as llama-server serves its one model whatever the name) unless
/// `strict` (`--strict-model-name`), when a name other than `served` gets 404.
pub fn check_model(asked: Option<&str>, served: &str, aliases: &[String], strict: bool) -> Result<(), ApiError> {
    match asked {
        Some(model) if strict && model != served && !aliases.iter().any(|alias| alias == model) => {
            Err(ApiError::model_not_found(model, served))
        }
        _ => Ok(()),
    }
}

/// The alternatives per token to send log-probabilities of, or `None`:
/// `logprobs: true` with `top_logprobs` (chat), or `logprobs: n`
/// (completions); absent, null or `false` is off.
fn logprobs(params: &Params) -> Result<Option<usize>, ApiError> {
    let bad = |why: String| ApiError::invalid_param("logprobs", why);
    let top = params.top_logprobs.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    let asked = match &params.logprobs {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {
            if top.is_some_and(|n| n > 0) {
                return Err(ApiError::invalid_param("top_logprobs", "top_logprobs needs logprobs: true"));
            }
            return Ok(None);
        }
        Some(Value::Bool(true)) => top.unwrap_or(0),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            None => return Err(bad(format!("logprobs = {n}: a count of alternatives (0 to {MAX_TOP_LOGPROBS})"))),
        },
        Some(other) => return Err(bad(format!("logprobs = {other}: true, false or a count of alternatives"))),
    };
    if asked > MAX_TOP_LOGPROBS {
        let name = if params.top_logprobs.is_some() { "top_logprobs" } else { "logprobs" };
        return Err(ApiError::invalid_param(name, format!("at most {MAX_TOP_LOGPROBS} alternatives, not {asked}")));
    }
    Ok(Some(asked))
}

/// `response_format` (see [`OutputFormat::from_response_format`]) or
/// llama-server's `json_schema` (the same as a `json_schema` format) or
/// `grammar` (GBNF), not two of them.
fn format(params: &Params, grammars: &Grammars) -> Result<OutputFormat, ApiError> {
    let mut response_format = params.response_format.clone().filter(|v| !v.is_null());
    if let Some(schema) = params.json_schema.as_ref().filter(|v| !v.is_null()) {
        if response_format.is_some() {
            return Err(ApiError::invalid_param("json_schema", "json_schema and response_format: give one"));
        }
        response_format = Some(serde_json::json!({"type": "json_schema", "json_schema": {"schema": schema}}));
    }
    match (response_format.as_ref(), params.grammar.as_deref()) {
        (None, None) => Ok(OutputFormat::Text),
        (Some(value), None) => OutputFormat::from_response_format(value)
            .and_then(|format| format.compiled(grammars))
            .map_err(|why| ApiError::invalid_param("response_format", why)),
        (None, Some(gbnf)) => OutputFormat::grammar(&GrammarSource::Gbnf(gbnf.to_string()), grammars)
            .map_err(|why| ApiError::invalid_param("grammar", why)),
        (Some(_), Some(_)) => {
            Err(ApiError::invalid_param("grammar", "grammar and response_format hold the same text: give one"))
        }
    }
}

fn stops(stop: Option<Stop>) -> Result<Vec<String>, ApiError> {
    let stops = match stop {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s],
        Some(Stop::Many(v)) => v,
    };
    if stops.len() > MAX_STOPS {
        return Err(ApiError::invalid_param("stop", format!("at most {MAX_STOPS} stop strings, not {}", stops.len())));
    }
    if stops.iter().any(String::is_empty) {
        return Err(ApiError::invalid_param("stop", "a stop string is empty"));
    }
    Ok(stops)
}

/// Most a logit bias may move a logit either way (OpenAI's range).
pub const MAX_LOGIT_BIAS: f64 = 100.0;

/// `logit_bias`: OpenAI's object of token ids (as strings) to biases in
/// `[-100, 100]`, or llama-server's list of `[id, bias]` pairs; a bias of
/// `false` bans its token (llama-server's). Token texts in place of ids
/// were made ids before (`bias_text.rs`); ids outside the `vocab` are
/// refused.
fn logit_bias(value: Option<&Value>, vocab: usize) -> Result<LogitBias, ApiError> {
    let bad = |why: String| ApiError::invalid_param("logit_bias", why);
    let id = |text: &str| -> Result<u32, ApiError> {
        match text.parse::<u32>() {
            Ok(id) if (id as usize) < vocab => Ok(id),
            Ok(id) => Err(bad(format!("token id {id} is outside the vocabulary of {vocab}"))),
            Err(_) => Err(bad(format!("{text:?} is not a token id"))),
        }
    };
    let bias = |token: u32, value: &Value| -> Result<f32, ApiError> {
        match value {
            Value::Bool(false) => Ok(f32::NEG_INFINITY),
            Value::Number(n) => match n.as_f64() {
                Some(b) if (-MAX_LOGIT_BIAS..=MAX_LOGIT_BIAS).contains(&b) => Ok(b as f32),
                _ => Err(bad(format!("the bias {n} of token {token} is outside [-100, 100]"))),
            },
            other => {
                Err(bad(format!("the bias {other} of token {token}: a number in [-100, 100], or false to ban it")))
            }
        }
    };
    let entries = match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(key, value)| {
                let token = id(key)?;
                Ok((token, bias(token, value)?))
            })
            .collect::<Result<_, ApiError>>()?,
        Some(Value::Array(pairs)) => pairs
            .iter()
            .map(|pair| match pair.as_array().map(Vec::as_slice) {
                Some([Value::Number(n), value]) => {
                    let token = id(&n.to_string())?;
                    Ok((token, bias(token, value)?))
                }
                _ => Err(bad(format!("{pair}: each pair is [token id, bias]"))),
            })
            .collect::<Result<_, ApiError>>()?,
        Some(other) => {
            return Err(bad(format!("{other}: an object of token ids to biases, or a list of [token id, bias] pairs")))
        }
    };
    Ok(LogitBias::new(entries))
}

/// llama.cpp's defaults ([`SamplingParams::default`]) with the request's
/// values over them; without `seed`, a fresh random seed. The penalties'
/// window is bounded by the sequence's context (`-1` is the context, as
/// llama.cpp's `repeat_last_n`); the logit bias's ids by its vocabulary.
fn sampling(params: &Params, info: &ModelInfo) -> Result<SamplingParams, ApiError> {
    let context = info.context;
    let mut s = SamplingParams::default();
    if let Some(t) = params.temperature {
        s.temperature = t;
    }
    if let Some(p) = params.top_p {
        s.top_p = p;
    }
    if let Some(k) = params.top_k {
        s.top_k = usize::try_from(k).unwrap_or(usize::MAX);
    }
    if let Some(p) = params.min_p {
        s.min_p = p;
    }
    if let Some(p) = params.repetition_penalty {
        s.repeat_penalty = p;
    }
    if let Some(n) = params.repeat_last_n {
        s.repeat_last_n = match n {
            -1 => context,
            n => usize::try_from(n).map_err(|_| {
                ApiError::invalid_param(
                    "repeat_last_n",
                    format!("repeat_last_n = {n}: use 0 (off), -1 (the context) or a count of tokens"),
                )
            })?,
        }
        .min(context);
    }
    for (name, value, field) in [
        ("presence_penalty", params.presence_penalty, &mut s.presence_penalty),
        ("frequency_penalty", params.frequency_penalty, &mut s.frequency_penalty),
    ] {
        if let Some(v) = value {
            if !(-2.0..=2.0).contains(&v) {
                return Err(ApiError::invalid_param(name, format!("{name} = {v} is outside [-2, 2]")));
            }
            *field = v;
        }
    }
    s.seed = params.seed.unwrap_or_else(fresh_seed);
    s.logit_bias = logit_bias(params.logit_bias.as_ref(), info.vocab)?;
    s.validate().map_err(|e| ApiError::invalid(e.to_string()))?;
    Ok(s)
}

/// A seed no other request shares (std's per-process random hash keys,
/// fresh for each `RandomState`).
fn fresh_seed() -> u64 {
    RandomState::new().hash_one(std::time::SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> ModelInfo {
        let tokenizer = baton_model::Tokenizer::from_config(&baton_model::baton_tokenizer::synthetic_bpe(300));
        let grammars = crate::engine::Grammars::new(std::sync::Arc::new(tokenizer.expect("tokenizer")));
        ModelInfo { name: "m".into(), context: 64, vocab: 100, dim: 8, chat_template: None, eos: None, grammars }
    }

    fn params(json: &str) -> Params {
        serde_json::from_str(json).expect("params parse")
    }

    #[test]
    fn request_values_override_the_defaults() {
        let p = params(
            r#"{"model":"m","temperature":0,"top_k":3,"seed":7,"max_tokens":5,"stop":"x","repeat_penalty":1.1}"#,
        );
        let job = Job::new(&p, vec![1], &info()).expect("valid");
        let s = job.request.sampling;
        assert_eq!((s.temperature, s.top_k, s.seed, s.repeat_penalty), (0.0, 3, 7, 1.1));
        assert_eq!((job.request.max_tokens, job.stops), (Some(5), vec!["x".to_string()]));
    }

    #[test]
    fn without_a_seed_each_request_gets_another() {
        let a = Job::new(&params("{}"), vec![1], &info()).expect("valid").request.sampling.seed;
        let b = Job::new(&params("{}"), vec![1], &info()).expect("valid").request.sampling.seed;
        assert_ne!(a, b);
    }

    #[test]
    fn unsupported_values_are_refused_not_ignored() {
        for json in [
            r#"{"presence_penalty":2.5}"#,
            r#"{"frequency_penalty":-3}"#,
            r#"{"n":0}"#,
            r#"{"n":17}"#,
            r#"{"n":1000}"#,
            r#"{"logprobs":true,"top_logprobs":21}"#,
            r#"{"logprobs":30}"#,
            r#"{"logprobs":-1}"#,
            r#"{"logprobs":"yes"}"#,
            r#"{"top_logprobs":3}"#,
            r#"{"stop":["a",""]}"#,
            r#"{"temperature":-1}"#,
            r#"{"top_p":0}"#,
            r#"{"repeat_last_n":-2}"#,
            r#"{"repeat_penalty":0}"#,
            r#"{"logit_bias":{"x":1}}"#,
            r#"{"logit_bias":{"100":1}}"#,
            r#"{"logit_bias":{"5":-101}}"#,
            r#"{"logit_bias":{"5":true}}"#,
            r#"{"logit_bias":[[5]]}"#,
            r#"{"logit_bias":[["a",1]]}"#,
            r#"{"logit_bias":7}"#,
            r#"{"stream_options":{"include_usage":true}}"#,
        ] {
            let e = Job::new(&params(json), vec![1], &info()).expect_err(json);
            assert_eq!(e.status, 400, "{json}");
        }
        assert!(Job::new(&params(r#"{"model":"other"}"#), vec![1], &info()).is_ok(), "any model name is served");
        assert!(Job::new(&params(r#"{"presence_penalty":0,"n":1,"logprobs":false}"#), vec![1], &info()).is_ok());
    }

    #[test]
    fn only_a_strict_server_refuses_another_model_name() {
        assert!(check_model(Some("gpt-3.5-turbo"), "m", &[], false).is_ok());
        assert!(check_model(None, "m", &[], true).is_ok());
        assert!(check_model(Some("m"), "m", &[], true).is_ok());
        assert_eq!(check_model(Some("other"), "m", &[], true).expect_err("strict").status, 404);
        let aliases = ["m".to_string(), "n".to_string()];
        assert!(check_model(Some("n"), "m", &aliases, true).is_ok(), "an alias is the model's name too");
        assert_eq!(check_model(Some("o"), "m", &aliases, true).expect_err("strict").status, 404);
    }

    #[test]
    fn logprobs_are_asked_as_chat_or_completions_ask() {
        for (json, expected) in [
            (r#"{}"#, None),
            (r#"{"logprobs":false,"top_logprobs":0}"#, None),
            (r#"{"logprobs":null}"#, None),
            (r#"{"logprobs":true}"#, Some(0)),
            (r#"{"logprobs":true,"top_logprobs":20}"#, Some(20)),
            (r#"{"logprobs":0}"#, Some(0)),
            (r#"{"logprobs":5}"#, Some(5)),
        ] {
            assert_eq!(Job::new(&params(json), vec![1], &info()).expect(json).request.logprobs, expected, "{json}");
        }
    }

    #[test]
    fn logit_bias_is_read_from_an_object_or_pairs() {
        for (json, expected) in [
            (r#"{}"#, vec![]),
            (r#"{"logit_bias":null}"#, vec![]),
            (r#"{"logit_bias":{"5":-100,"7":2.5}}"#, vec![(5, -100.0), (7, 2.5)]),
            (r#"{"logit_bias":{"99":false}}"#, vec![(99, f32::NEG_INFINITY)]),
            (r#"{"logit_bias":[[5,100],[6,false]]}"#, vec![(5, 100.0), (6, f32::NEG_INFINITY)]),
        ] {
            let job = Job::new(&params(json), vec![1], &info()).expect(json);
            assert_eq!(job.request.sampling.logit_bias.entries(), &expected[..], "{json}");
        }
    }

    #[test]
    fn the_penalty_window_is_bounded_by_the_context() {
        for (n, expected) in [(100_000_000_000i64, 64), (i64::MAX, 64), (-1, 64), (10, 10), (0, 0)] {
            let p = params(&format!(r#"{{"repeat_last_n":{n}}}"#));
            let job = Job::new(&p, vec![1], &info()).expect("valid");
            assert_eq!(job.request.sampling.repeat_last_n, expected, "repeat_last_n {n}");
        }
    }

    #[test]
    fn null_booleans_mean_false() {
        let p = params(r#"{"stream":null,"ignore_eos":null,"stream_options":{"include_usage":null}}"#);
        let job = Job::new(&p, vec![1], &info()).expect("valid");
        assert!(!job.stream && job.request.stop_at_eog && !job.include_usage);
        let p = params(r#"{"stream":true,"ignore_eos":true}"#);
        let job = Job::new(&p, vec![1], &info()).expect("valid");
        assert!(job.stream && !job.request.stop_at_eog);
    }
}
