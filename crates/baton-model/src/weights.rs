//! Model weights and KV cache in device memory.

use std::collections::HashMap;
use std::sync::Arc;

use baton_core::backend::{Buffer, BufferRange, Device, FileRange, Pending, Stream, TensorRef};
use baton_core::DType;
use baton_gguf::GgufFile;

use baton_composite::CompositeDevice;

use crate::config::LlamaConfig;
use crate::error::ModelError;
use crate::expert_parallel::{share_name, ExpertSplit, ShareHolding};
use crate::tensor_parallel::TensorShares;

/// Alignment of each tensor inside the weight buffer.
const ALIGN: usize = 64;

/// Every weight of a model: each in the buffer of the device that runs its
/// layer (one buffer per device).
pub struct Weights {
    tensors: HashMap<String, TensorRef>,
    bytes: usize,
    mapped_bytes: usize,
}

struct Placed<'a> {
    name: String,
    device: usize,
    offset: usize,
    dtype: DType,
    dims: Vec<usize>,
    data: &'a [u8],
    file_offset: u64,
}

/// Host bytes of uploads in flight at most while loading by copy: the
/// oldest is waited for beyond this, so a load never holds a second copy of
/// the model on the host.
const UPLOAD_IN_FLIGHT: usize = 64 << 20;

impl Weights {
    /// Checks every weight's shape and type against `config` and places
    /// each on the device `device_of(layer)` of its layer (one buffer per
    /// device). A tied output projection is bound as `output.weight` to the
    /// embedding's data (placed once more if the output's device differs).
    ///
    /// With `source` (the open file `file` was parsed from), a device that
    /// can map files ([`Device::map_file`]) reads its weights straight from
    /// the file's pages: nothing is copied, and what its kernels derive from
    /// them (the CPU's packed matrices) replaces them in memory. Every
    /// other device gets a buffer, filled tensor by tensor through its
    /// stream with at most [`UPLOAD_IN_FLIGHT`] bytes of host copies at
    /// once. Only devices that are `local` (this process's) get their
    /// bytes: another process's device is a stand-in whose tensors are
    /// placed but never read here.
    ///
    /// Under an expert `split`, device `d` holds its share of each layer's
    /// stacked experts, a range of the tensor's bytes named
    /// [`share_name`]`(name, d)` (mapped, or copied, as any weight), and
    /// its own whole copy of the experts' gate and up biases.
    pub fn load(
        file: &GgufFile,
        source: Option<&std::fs::File>,
        config: &LlamaConfig,
        (devices, streams): (&[Arc<dyn Device>], &[Stream]),
        device_of: &dyn Fn(&str) -> usize,
        local: &dyn Fn(usize) -> bool,
        split: Option<&ExpertSplit>,
    ) -> Result<Weights, ModelError> {
        let mut placed: Vec<Placed<'_>> = Vec::new();
        let mut totals = vec![0usize; devices.len()];
        let holder = |name: &str| -> &dyn Device { &*devices[device_of(name)] };
        let mut held = Vec::new();
        for weight in checked_weights(file, config, &holder)? {
            match (split, config.experts) {
                (Some(split), Some(experts)) => held.extend(weight.shares(split, experts.count, device_of)?),
                _ => held.push((device_of(&weight.name), weight)),
            }
        }
        for (device, Checked { name, dims: expected, dtype, data, file_offset }) in held {
            let offset = totals[device].div_ceil(ALIGN) * ALIGN;
            totals[device] = offset + data.len();
            placed.push(Placed { name, device, offset, dtype, dims: expected, data, file_offset });
        }
        let mut tensors = HashMap::new();
        let (mut bytes, mut mapped_bytes) = (0, 0);
        for (d, device) in devices.iter().enumerate() {
            let mine: Vec<&Placed<'_>> = placed.iter().filter(|p| p.device == d).collect();
            if mine.is_empty() {
                continue;
            }
            let mapped = match source {
                Some(source) if local(d) => map_weights(&**device, source, &mine)?,
                _ => None,
            };
            if let Some((buffer, start)) = mapped {
                for p in &mine {
                    let offset = (p.file_offset - start) as usize;
                    tensors.insert(p.name.clone(), TensorRef::new(&buffer, offset, p.dtype, &p.dims)?);
                }
                // The mapped range (a tied output shares the embedding's),
                // or under an expert split its tensors' bytes (each device's
                // share of every layer's experts spans most of the file).
                mapped_bytes += match split {
                    Some(_) => mine.iter().map(|p| p.data.len()).sum(),
                    None => buffer.len(),
                };
                continue;
            }
            let buffer: Buffer = device.alloc(totals[d])?;
            // Read-only once a computation reads them; the CPU backend then
            // packs its matmul weights for its kernels.
            buffer.declare_weights();
            if local(d) {
                upload(&streams[d], &buffer, &mine)?;
            }
            for p in &mine {
                tensors.insert(p.name.clone(), TensorRef::new(&buffer, p.offset, p.dtype, &p.dims)?);
            }
            bytes += mine.iter().map(|p| p.data.len()).sum::<usize>();
        }
        Ok(Weights { tensors, bytes: bytes + mapped_bytes, mapped_bytes })
    }

    /// Checks every weight as [`load`](Self::load) does and places each in
    /// its own buffer of the composite `device`, held as `shares` says
    /// (split, or mirrored where a split would cut a quantization block).
    /// With `source` (the open file), each inner device that can map files
    /// maps its share of the file ([`CompositeDevice::map_split`]): the
    /// share's range for a matrix cut by rows or a mirrored norm or
    /// embedding, the whole matrix read as a strided view for one cut along
    /// its rows' length. The rest (partial sums, devices that cannot map)
    /// is uploaded, at most [`UPLOAD_IN_FLIGHT`] bytes of host copies at
    /// once.
    pub fn load_tensor_parallel(
        file: &GgufFile,
        source: Option<&std::fs::File>,
        config: &LlamaConfig,
        device: &CompositeDevice,
        stream: &Stream,
        shares: &TensorShares,
    ) -> Result<Weights, ModelError> {
        let mut tensors = HashMap::new();
        let mut uploads = Uploads::default();
        let (mut bytes, mut mapped_bytes) = (0, 0);
        let holder = |_: &str| -> &dyn Device { device };
        for Checked { name, dims: expected, dtype, data, file_offset } in checked_weights(file, config, &holder)? {
            let mut split = shares.weight(&name);
            if !TensorShares::fits(&split, dtype, &expected) {
                split = baton_composite::TensorSplit::Mirror;
            }
            bytes += data.len();
            if let Some(source) = source {
                if let Some(tensor) = device.map_split(source, file_offset, (dtype, &expected), split.clone())? {
                    mapped_bytes += data.len();
                    tensors.insert(name, tensor);
                    continue;
                }
            }
            let tensor = device.alloc_split(dtype, &expected, split)?;
            tensor.buffer().declare_weights();
            uploads.write(stream, &tensor.buffer().all(), data)?;
            tensors.insert(name, tensor);
        }
        uploads.finish()?;
        Ok(Weights { tensors, bytes, mapped_bytes })
    }

    /// A weight by GGUF name.
    pub fn get(&self, name: &str) -> Option<&TensorRef> {
        self.tensors.get(name)
    }

    /// Every weight.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &TensorRef)> {
        self.tensors.iter()
    }

    /// Bytes of the weights on the devices (mapped or copied).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes of the weights read straight from the file's pages
    /// ([`Device::map_file`]), not copied.
    pub fn mapped_bytes(&self) -> usize {
        self.mapped_bytes
    }
}

/// A weight of the file whose shape and type were checked against the
/// config.
struct Checked<'a> {
    name: String,
    dims: Vec<usize>,
    dtype: DType,
    data: &'a [u8],
    /// Offset of `data` in the file.
    file_offset: u64,
}

impl<'a> Checked<'a> {
    /// Where this weight goes under an expert `split` of `count` experts a
    /// layer: each device its share (a range of the experts), or each
    /// device a whole copy, or the device `device_of` its name where it is
    /// not split.
    fn shares(
        self,
        split: &ExpertSplit,
        count: usize,
        device_of: &dyn Fn(&str) -> usize,
    ) -> Result<Vec<(usize, Checked<'a>)>, ModelError> {
        let part = |device: usize, experts: std::ops::Range<usize>| {
            let per_expert = self.data.len() / count;
            let mut dims = self.dims.clone();
            dims[0] = experts.len();
            Checked {
                name: share_name(&self.name, device),
                dims,
                dtype: self.dtype,
                data: &self.data[experts.start * per_expert..experts.end * per_expert],
                file_offset: self.file_offset + (experts.start * per_expert) as u64,
            }
        };
        match split.holding(&self.name) {
            Some(ShareHolding::Split) => {
                if self.dims.first() != Some(&count) || !self.data.len().is_multiple_of(count) {
                    let mut expected = self.dims.clone();
                    expected[0] = count;
                    return Err(ModelError::TensorShape {
                        name: self.name.clone(),
                        found: self.dims.clone(),
                        expected,
                    });
                }
                Ok(split.shares(count).into_iter().enumerate().map(|(d, r)| (d, part(d, r))).collect())
            }
            Some(ShareHolding::Mirror) => Ok((0..split.devices)
                .map(|d| (d, Checked { name: share_name(&self.name, d), dims: self.dims.clone(), ..self }))
                .collect()),
            None => Ok(vec![(device_of(&self.name), self)]),
        }
    }
}

/// Every weight `config` needs, checked: present (a tied output reads the
/// embedding), of the expected shape, of a type the device `holder(name)`
/// it goes to holds ([`Device::holds_weights`]), norms and biases in f32.
fn checked_weights<'a, 'd>(
    file: &'a GgufFile,
    config: &LlamaConfig,
    holder: &dyn Fn(&str) -> &'d dyn Device,
) -> Result<Vec<Checked<'a>>, ModelError> {
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
        let type_name = gtype.name().unwrap_or("unknown");
        let dtype = DType::from_ggml_id(gtype.id())
            .ok_or_else(|| ModelError::UnsupportedType { name: name.clone(), type_name: type_name.to_string() })?;
        let device = holder(&name);
        if !device.holds_weights(dtype) {
            // A type Baton reads that this device cannot hold (the Vulkan
            // shaders decode fewer types than the CPU kernels): say which.
            let type_name = format!("{type_name} on {}", device.info().name);
            return Err(ModelError::UnsupportedType { name, type_name });
        }
        if expected.len() == 1 && dtype != DType::F32 {
            return Err(ModelError::UnsupportedType {
                name,
                type_name: format!("{dtype} (norm weights and biases must be f32)"),
            });
        }
        if name.ends_with(".ssm_conv1d.weight") && dtype != DType::F32 {
            return Err(ModelError::UnsupportedType {
                name,
                type_name: format!("{dtype} (a recurrent layer's convolution must be f32)"),
            });
        }
        let file_offset = tensor.info().file_offset();
        checked.push(Checked { name, dims: expected, dtype, data: tensor.data(), file_offset });
    }
    Ok(checked)
}

/// Maps the file range that holds `placed` (one device's weights) as a
/// buffer of that device; `None` where the device cannot map files. Returns
/// the buffer and the file offset of its first byte.
fn map_weights(
    device: &dyn Device,
    source: &std::fs::File,
    placed: &[&Placed<'_>],
) -> Result<Option<(Buffer, u64)>, ModelError> {
    let start = placed.iter().map(|p| p.file_offset).min().unwrap_or(0);
    let end = placed.iter().map(|p| p.file_offset + p.data.len() as u64).max().unwrap_or(start);
    if end == start {
        return Ok(None);
    }
    let len =
        usize::try_from(end - start).map_err(|_| ModelError::Config("the weights do not fit in memory".into()))?;
    let buffer = device.map_file(FileRange { file: source, offset: start, len })?;
    Ok(buffer.map(|b| (b, start)))
}

/// Writes each of `placed` into `buffer` through `stream`, with at most
/// [`UPLOAD_IN_FLIGHT`] bytes of host copies in flight.
fn upload(stream: &Stream, buffer: &Buffer, placed: &[&Placed<'_>]) -> Result<(), ModelError> {
    let mut uploads = Uploads::default();
    for p in placed {
        let range = buffer.range(p.offset, p.data.len())?;
        uploads.write(stream, &range, p.data)?;
    }
    uploads.finish()
}

/// Host copies of weights on their way to a device, at most
/// [`UPLOAD_IN_FLIGHT`] bytes of them.
#[derive(Default)]
struct Uploads {
    in_flight: std::collections::VecDeque<(Pending<Vec<u8>>, usize)>,
    held: usize,
}

impl Uploads {
    /// Queues a copy of `data` into `range`, first waiting for the oldest
    /// copies while more than the bound is held.
    fn write(&mut self, stream: &Stream, range: &BufferRange, data: &[u8]) -> Result<(), ModelError> {
        while self.held > UPLOAD_IN_FLIGHT {
            let Some((done, len)) = self.in_flight.pop_front() else { break };
            done.wait().map_err(|e| ModelError::Stream(e.error))?;
            self.held -= len;
        }
        self.in_flight.push_back((stream.write_range_async(range, data.to_vec())?, data.len()));
        self.held += data.len();
        Ok(())
    }

    /// Waits for every copy.
    fn finish(self) -> Result<(), ModelError> {
        for (done, _) in self.in_flight {
            done.wait().map_err(|e| ModelError::Stream(e.error))?;
        }
        Ok(())
    }
}
