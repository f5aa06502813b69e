//! Model weights and KV cache in device memory.

use std::collections::HashMap;
use std::sync::Arc;

use baton_core::backend::{Buffer, Device, Stream, TensorRef};
use baton_core::DType;
use baton_gguf::GgufFile;

use baton_composite::CompositeDevice;

use crate::config::LlamaConfig;
use crate::error::ModelError;
use crate::tensor_parallel::TensorShares;

/// Alignment of each tensor inside the weight buffer.
const ALIGN: usize = 64;

/// Every weight of a model: each in the buffer of the device that runs its
/// layer (one buffer per device).
pub struct Weights {
    tensors: HashMap<String, TensorRef>,
    bytes: usize,
}

struct Placed<'a> {
    name: String,
    device: usize,
    offset: usize,
    dtype: DType,
    dims: Vec<usize>,
    data: &'a [u8],
}

impl Weights {
    /// Checks every weight's shape and type against `config` and uploads
    /// each to the device `device_of(layer)` of its layer, through that
    /// device's stream (one buffer and one host wait per device). A tied
    /// output projection is bound as `output.weight` to the embedding's data
    /// (uploaded once more if the output's device differs). Only devices
    /// that are `local` (this process's) get their bytes: another process's
    /// device is a stand-in whose tensors are placed but never read here.
    pub fn load(
        file: &GgufFile,
        config: &LlamaConfig,
        devices: &[Arc<dyn Device>],
        streams: &[Stream],
        device_of: &dyn Fn(usize) -> usize,
        local: &dyn Fn(usize) -> bool,
    ) -> Result<Weights, ModelError> {
        let mut placed: Vec<Placed<'_>> = Vec::new();
        let mut totals = vec![0usize; devices.len()];
        for Checked { name, dims: expected, dtype, data } in checked_weights(file, config)? {
            let device = device_of(config.weight_layer(&name));
            let offset = totals[device].div_ceil(ALIGN) * ALIGN;
            totals[device] = offset + data.len();
            placed.push(Placed { name, device, offset, dtype, dims: expected, data });
        }
        let mut tensors = HashMap::new();
        for (d, device) in devices.iter().enumerate() {
            if totals[d] == 0 {
                continue;
            }
            let buffer: Buffer = device.alloc(totals[d])?;
            // Read-only once a computation reads them; the CPU backend then
            // packs its matmul weights for its kernels.
            buffer.declare_weights();
            if local(d) {
                let mut host = vec![0u8; totals[d]];
                for p in placed.iter().filter(|p| p.device == d) {
                    host[p.offset..p.offset + p.data.len()].copy_from_slice(p.data);
                }
                streams[d].write_range_async(&buffer.all(), host)?.wait()?;
            }
            for p in placed.iter().filter(|p| p.device == d) {
                tensors.insert(p.name.clone(), TensorRef::new(&buffer, p.offset, p.dtype, &p.dims)?);
            }
        }
        Ok(Weights { tensors, bytes: totals.iter().sum() })
    }
    /// Checks every weight as [`load`](Self::load) does and uploads each
    /// into its own buffer of the composite `device`, held as `shares` says
    /// (split, or mirrored where a split would cut a quantization block).
    pub fn load_tensor_parallel(
        file: &GgufFile,
        config: &LlamaConfig,
        device: &CompositeDevice,
        stream: &Stream,
        shares: &TensorShares,
    ) -> Result<Weights, ModelError> {
        let mut tensors = HashMap::new();
        let mut pending = Vec::new();
        let mut bytes = 0;
        for Checked { name, dims: expected, dtype, data } in checked_weights(file, config)? {
            let mut split = shares.weight(&name);
            if !TensorShares::fits(&split, dtype, &expected) {
                split = baton_composite::TensorSplit::Mirror;
            }
            let tensor = device.alloc_split(dtype, &expected, split)?;
            tensor.buffer().declare_weights();
            pending.push(stream.write_range_async(&tensor.buffer().all(), data.to_vec())?);
            bytes += data.len();
            tensors.insert(name, tensor);
        }
        for p in pending {
            p.wait().map_err(|e| ModelError::Stream(e.error))?;
        }
        Ok(Weights { tensors, bytes })
    }

    /// A weight by GGUF name.
    pub fn get(&self, name: &str) -> Option<&TensorRef> {
        self.tensors.get(name)
    }

    /// Every weight.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &TensorRef)> {
        self.tensors.iter()
    }

    /// Bytes of device memory the weights take.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// A weight of the file whose shape and type were checked against the
/// config.
struct Checked<'a> {
    name: String,
    dims: Vec<usize>,
    dtype: DType,
    data: &'a [u8],
}

/// Every weight `config` needs, checked: present (a tied output reads the
/// embedding), of the expected shape, of a supported type, norms and
/// biases in f32.
fn checked_weights<'a>(file: &'a GgufFile, config: &LlamaConfig) -> Result<Vec<Checked<'a>>, ModelError> {
    let mut names = config.weight_shapes();
    if config.tied_output {
        names.push(("output.weight".to_string(), vec![config.vocab, config.dim]));
    }
    let mut checked = Vec::with_capacity(names.len());
    for (name, expected) in names {
        let source = if config.tied_output && name == "output.weight" { "token_embd.weight" } else { name.as_str() };
        let tensor = file.tensor(source).ok_or_else(|| ModelError::MissingTensor(source.to_string()))?;
        let found: Vec<usize> = tensor.dims().iter().rev().map(|&d| d as usize).collect();
        if found != expected {
            return Err(ModelError::TensorShape { name, found, expected });
        }
        let gtype = tensor.ggml_type();
        let dtype = DType::from_ggml_id(gtype.id()).filter(|&t| baton_kernels::is_weight_type(t)).ok_or_else(|| {
            ModelError::UnsupportedType { name: name.clone(), type_name: gtype.name().unwrap_or("unknown").to_string() }
        })?;
        if expected.len() == 1 && dtype != DType::F32 {
            return Err(ModelError::UnsupportedType {
                name,
                type_name: format!("{dtype} (norm weights and biases must be f32)"),
            });
        }
        checked.push(Checked { name, dims: expected, dtype, data: tensor.data() });
    }
    Ok(checked)
}

/// The KV cache of every layer: keys `[kv_heads, slots × context, head_dim]`
/// and values transposed, `[kv_heads, head_dim, slots × context]`, so that
/// attention reads both with contiguous rows. Slot `s` (one sequence) holds
/// positions `s × context..(s + 1) × context`.
pub struct KvCache {
    /// Per layer: (keys, values).
    pub layers: Vec<(TensorRef, TensorRef)>,
    /// Element type.
    pub dtype: DType,
    /// Positions of one slot.
    pub context: usize,
    /// Sequences it holds.
    pub slots: usize,
}

impl KvCache {
    /// Allocates a zeroed cache for `slots` sequences of `context` positions,
    /// each layer's on the device `device_of(layer)`.
    pub fn new(
        config: &LlamaConfig,
        (context, slots): (usize, usize),
        dtype: DType,
        devices: &[Arc<dyn Device>],
        device_of: &dyn Fn(usize) -> usize,
    ) -> Result<KvCache, ModelError> {
        let total = context * slots;
        let per = config.kv_heads * total * config.head_dim;
        let bytes = per * dtype.block_bytes();
        let mut layers = Vec::with_capacity(config.layers);
        let mut buffers: HashMap<usize, (Buffer, usize)> = HashMap::new();
        for (d, device) in devices.iter().enumerate() {
            let count = (0..config.layers).filter(|&l| device_of(l) == d).count();
            if count > 0 {
                buffers.insert(d, (device.alloc(2 * bytes * count)?, 0));
            }
        }
        for l in 0..config.layers {
            let entry =
                buffers.get_mut(&device_of(l)).ok_or_else(|| ModelError::Config(format!("layer {l} has no device")))?;
            let (buffer, next) = (&entry.0, entry.1);
            let k = TensorRef::new(buffer, next * bytes, dtype, &[config.kv_heads, total, config.head_dim])?;
            let v = TensorRef::new(buffer, (next + 1) * bytes, dtype, &[config.kv_heads, config.head_dim, total])?;
            entry.1 += 2;
            layers.push((k, v));
        }
        Ok(KvCache { layers, dtype, context, slots })
    }

    /// A zeroed cache for `slots` sequences of `context` positions on the
    /// composite `device`, each layer's keys and values split by KV heads
    /// as `shares` says.
    pub fn new_tensor_parallel(
        config: &LlamaConfig,
        (context, slots): (usize, usize),
        dtype: DType,
        device: &CompositeDevice,
        shares: &TensorShares,
    ) -> Result<KvCache, ModelError> {
        let (kvh, hd, total) = (config.kv_heads, config.head_dim, context * slots);
        let mut layers = Vec::with_capacity(config.layers);
        for _ in 0..config.layers {
            let (kd, vd) = ([kvh, total, hd], [kvh, hd, total]);
            let k = device.alloc_split(dtype, &kd, shares.cache())?;
            let v = device.alloc_split(dtype, &vd, shares.cache())?;
            layers.push((k, v));
        }
        Ok(KvCache { layers, dtype, context, slots })
    }
}
