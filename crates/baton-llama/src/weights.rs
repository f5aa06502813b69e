//! Model weights and KV cache in device memory.

use std::collections::HashMap;

use baton_core::backend::{Buffer, Device, Stream, TensorRef};
use baton_core::DType;
use baton_gguf::GgufFile;

use crate::config::LlamaConfig;
use crate::error::ModelError;

/// Alignment of each tensor inside the weight buffer.
const ALIGN: usize = 64;

/// Every weight of a model, in one device buffer.
pub struct Weights {
    tensors: HashMap<String, TensorRef>,
    bytes: usize,
}

impl Weights {
    /// Checks every weight's shape and type against `config` and uploads
    /// them to `device` through `stream` (one buffer, one host wait).
    pub fn load(
        file: &GgufFile,
        config: &LlamaConfig,
        device: &dyn Device,
        stream: &Stream,
    ) -> Result<Weights, ModelError> {
        let mut layout = Vec::new();
        let mut total = 0usize;
        for (name, expected) in config.weight_shapes() {
            let tensor = file.tensor(&name).ok_or_else(|| ModelError::MissingTensor(name.clone()))?;
            let found: Vec<usize> = tensor.dims().iter().rev().map(|&d| d as usize).collect();
            if found != expected {
                return Err(ModelError::TensorShape { name, found, expected });
            }
            let gtype = tensor.ggml_type();
            let dtype = DType::from_ggml_id(gtype.id()).filter(|t| t.is_float()).ok_or_else(|| {
                ModelError::UnsupportedType {
                    name: name.clone(),
                    type_name: gtype.name().unwrap_or("unknown").to_string(),
                }
            })?;
            let is_norm = expected.len() == 1;
            if is_norm && dtype != DType::F32 {
                return Err(ModelError::UnsupportedType {
                    name,
                    type_name: format!("{dtype} (norm weights must be f32)"),
                });
            }
            let offset = total.div_ceil(ALIGN) * ALIGN;
            total = offset + tensor.data().len();
            layout.push((name, offset, dtype, expected, tensor.data()));
        }
        let mut host = vec![0u8; total];
        for (_, offset, _, _, data) in &layout {
            host[*offset..*offset + data.len()].copy_from_slice(data);
        }
        let buffer: Buffer = device.alloc(total)?;
        stream.write_range_async(&buffer.all(), host)?.wait().map_err(|e| ModelError::Stream(e.error))?;
        let mut tensors = HashMap::new();
        for (name, offset, dtype, dims, _) in layout {
            tensors.insert(name, TensorRef::new(&buffer, offset, dtype, &dims)?);
        }
        Ok(Weights { tensors, bytes: total })
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

/// The KV cache of every layer: keys `[kv_heads, context, head_dim]` and
/// values transposed, `[kv_heads, head_dim, context]`, so that attention reads
/// both with contiguous rows.
pub struct KvCache {
    /// Per layer: (keys, values).
    pub layers: Vec<(TensorRef, TensorRef)>,
    /// Element type.
    pub dtype: DType,
    /// Positions it holds.
    pub context: usize,
}

impl KvCache {
    /// Allocates a zeroed cache for `context` positions on `device`.
    pub fn new(config: &LlamaConfig, context: usize, dtype: DType, device: &dyn Device) -> Result<KvCache, ModelError> {
        let per = config.kv_heads * context * config.head_dim;
        let bytes = per * dtype.block_bytes();
        let buffer = device.alloc(2 * bytes * config.layers)?;
        let mut layers = Vec::with_capacity(config.layers);
        for l in 0..config.layers {
            let k = TensorRef::new(&buffer, 2 * l * bytes, dtype, &[config.kv_heads, context, config.head_dim])?;
            let v = TensorRef::new(&buffer, (2 * l + 1) * bytes, dtype, &[config.kv_heads, config.head_dim, context])?;
            layers.push((k, v));
        }
        Ok(KvCache { layers, dtype, context })
    }
}
