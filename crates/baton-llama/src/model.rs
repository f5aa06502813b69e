//! A loaded model on one device: evaluate tokens, get logits.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use baton_core::backend::{Bindings, Buffer, Device, Stream, TensorRef};
use baton_core::graph::Graph;
use baton_core::DType;
use baton_gguf::GgufFile;
use baton_tokenizer::Tokenizer;

use crate::config::LlamaConfig;
use crate::error::ModelError;
use crate::graph::{self, GraphShape, Logits, WeightTypes};
use crate::weights::{KvCache, Weights};

/// Options of loading a model.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Positions the KV cache holds (`-c`); `None` = the model's context,
    /// capped at 4096.
    pub context: Option<usize>,
    /// Element type of the KV cache (f16 like llama.cpp, or f32).
    pub cache_type: DType,
    /// Most tokens one evaluation takes (`-b`/`-ub`).
    pub batch: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { context: None, cache_type: DType::F16, batch: 512 }
    }
}

/// Graphs kept per model (one per shape seen recently).
const GRAPH_CACHE: usize = 16;

/// A llama model loaded on one device.
pub struct Model {
    config: LlamaConfig,
    tokenizer: Arc<Tokenizer>,
    device: Arc<dyn Device>,
    stream: Stream,
    weights: Weights,
    cache: KvCache,
    batch: usize,
    io: Buffer,
    logits_offset: usize,
    graphs: Vec<(GraphShape, Arc<Graph>)>,
    host_ids: Option<Vec<i32>>,
    host_positions: Option<Vec<i32>>,
    host_logits: Option<Vec<f32>>,
    file_bytes: u64,
}

struct Types<'a>(&'a Weights);

impl WeightTypes for Types<'_> {
    fn weight_type(&self, name: &str) -> DType {
        self.0.get(name).map_or(DType::F32, TensorRef::dtype)
    }
}

impl Model {
    /// Loads the GGUF file at `path` onto `device`.
    pub fn load(path: &Path, device: Arc<dyn Device>, options: &LoadOptions) -> Result<Model, ModelError> {
        let file = GgufFile::open(path)?;
        let config = LlamaConfig::from_gguf(&file)?;
        let tokenizer = crate::vocab::tokenizer(&file)?;
        if tokenizer.vocab_size() != config.vocab {
            return Err(ModelError::Config(format!(
                "the vocabulary has {} tokens, the model {}",
                tokenizer.vocab_size(),
                config.vocab
            )));
        }
        let tokenizer = Arc::new(tokenizer);
        let stream = device.new_stream()?;
        let weights = Weights::load(&file, &config, device.as_ref(), &stream)?;
        let context = options.context.unwrap_or(config.context.min(4096)).max(1);
        let cache = KvCache::new(&config, context, options.cache_type, device.as_ref())?;
        let batch = options.batch.clamp(1, context);
        let logits_offset = (2 * batch * 4).div_ceil(64) * 64;
        let io = device.alloc(logits_offset + batch * config.vocab * 4)?;
        let file_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        Ok(Model {
            config,
            tokenizer,
            device,
            stream,
            weights,
            cache,
            batch,
            io,
            logits_offset,
            graphs: Vec::new(),
            host_ids: Some(Vec::new()),
            host_positions: Some(Vec::new()),
            host_logits: Some(Vec::new()),
            file_bytes,
        })
    }

    /// Hyper-parameters.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The tokenizer, shared (to decode while the model is borrowed).
    pub fn shared_tokenizer(&self) -> Arc<Tokenizer> {
        self.tokenizer.clone()
    }

    /// The device it runs on.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }

    /// Positions the KV cache holds.
    pub fn context(&self) -> usize {
        self.cache.context
    }

    /// Most tokens one evaluation takes.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Size of the GGUF file in bytes.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// Bytes of weights on the device.
    pub fn weight_bytes(&self) -> usize {
        self.weights.bytes()
    }

    fn graph(&mut self, shape: GraphShape) -> Result<Arc<Graph>, ModelError> {
        if let Some((_, g)) = self.graphs.iter().find(|(s, _)| *s == shape) {
            return Ok(g.clone());
        }
        let g =
            Arc::new(graph::build(&self.config, &Types(&self.weights), shape, self.cache.dtype, self.cache.context)?);
        if self.graphs.len() == GRAPH_CACHE {
            self.graphs.remove(0);
        }
        self.graphs.push((shape, g.clone()));
        Ok(g)
    }

    /// Evaluates `tokens` at positions `past..past + tokens.len()` (at most
    /// [`batch`](Self::batch) tokens), writing their keys and values into the
    /// cache, and returns the logits: one row of `vocab` for the last token,
    /// or one per token with [`Logits::All`]. The host waits once, for the
    /// logits.
    pub fn eval(&mut self, tokens: &[u32], past: usize, logits: Logits) -> Result<&[f32], ModelError> {
        let t = tokens.len();
        if t == 0 || t > self.batch {
            return Err(ModelError::Input(format!("an evaluation takes 1 to {} tokens, not {t}", self.batch)));
        }
        if past + t > self.cache.context {
            return Err(ModelError::ContextFull { needed: past + t, context: self.cache.context });
        }
        if let Some(&bad) = tokens.iter().find(|&&id| id as usize >= self.config.vocab) {
            return Err(ModelError::Input(format!(
                "token id {bad} is outside the vocabulary of {}",
                self.config.vocab
            )));
        }
        let shape = GraphShape { tokens: t, past, logits };
        let graph = self.graph(shape)?;
        let rows = if logits == Logits::All { t } else { 1 };
        let ids_t = TensorRef::new(&self.io, 0, DType::I32, &[t])?;
        let pos_t = TensorRef::new(&self.io, t * 4, DType::I32, &[t])?;
        let logits_t = TensorRef::new(&self.io, self.logits_offset, DType::F32, &[rows, self.config.vocab])?;
        let mut bindings = Bindings::new(&graph);
        bindings.bind_name(&graph, "tokens", ids_t.clone())?;
        bindings.bind_name(&graph, "positions", pos_t.clone())?;
        bindings.bind_name(&graph, "logits", logits_t.clone())?;
        for (name, tensor) in self.weights.iter() {
            if graph.find(name).is_some() {
                bindings.bind_name(&graph, name, tensor.clone())?;
            }
        }
        for (l, (k, v)) in self.cache.layers.iter().enumerate() {
            bindings.bind_name(&graph, &graph::key_cache_name(l), k.clone())?;
            bindings.bind_name(&graph, &graph::value_cache_name(l), v.clone())?;
        }
        let mut ids = self.host_ids.take().unwrap_or_default();
        ids.clear();
        ids.extend(tokens.iter().map(|&id| id as i32));
        let mut positions = self.host_positions.take().unwrap_or_default();
        positions.clear();
        positions.extend((past..past + t).map(|p| p as i32));
        let ids_w = self.stream.write_async(&ids_t, ids)?;
        let pos_w = self.stream.write_async(&pos_t, positions)?;
        self.stream.compute(&graph, bindings)?;
        let mut host_logits = self.host_logits.take().unwrap_or_default();
        host_logits.resize(rows * self.config.vocab, 0.0);
        let read = self.stream.read_into_async(&logits_t, host_logits)?;
        let host_logits = read.wait().map_err(|e| ModelError::Stream(e.error))?;
        // Reached already (earlier on the stream): these do not block.
        self.host_ids = Some(ids_w.wait().map_err(|e| ModelError::Stream(e.error))?);
        self.host_positions = Some(pos_w.wait().map_err(|e| ModelError::Stream(e.error))?);
        self.host_logits = Some(host_logits);
        Ok(self.host_logits.as_deref().unwrap_or(&[]))
    }

    /// Evaluates a prompt of any length in batches, from position `past`;
    /// returns the last token's logits.
    pub fn eval_prompt(&mut self, tokens: &[u32], past: usize) -> Result<&[f32], ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::Input("the prompt is empty".into()));
        }
        let batch = self.batch;
        let chunks = tokens.len().div_ceil(batch);
        for (i, chunk) in tokens.chunks(batch).enumerate() {
            if i + 1 < chunks {
                self.eval(chunk, past + i * batch, Logits::Last)?;
            }
        }
        let last = chunks - 1;
        self.eval(&tokens[last * batch..], past + last * batch, Logits::Last)
    }

    /// Graph shapes built so far (for tests of graph reuse).
    pub fn cached_graphs(&self) -> usize {
        self.graphs.len()
    }

    /// The weights' tensors by name.
    pub fn weight_tensors(&self) -> HashMap<String, TensorRef> {
        self.weights.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}
