//! Loading a model onto its devices: one device, a layer split, ranks or
//! tensor shares; the cache allocated beside the weights, and the warm-up
//! step.

use super::*;

impl Model {
    /// Loads the GGUF file at `path` onto one device.
    pub fn load(path: impl AsRef<Path>, device: impl IntoDevice, options: &LoadOptions) -> Result<Model, ModelError> {
        Self::load_split(path, [device], options)
    }

    /// Loads the GGUF file at `path` with its layers split over `devices`.
    pub fn load_split(
        path: impl AsRef<Path>,
        devices: impl IntoIterator<Item = impl IntoDevice>,
        options: &LoadOptions,
    ) -> Result<Model, ModelError> {
        Self::load_with(path.as_ref(), into_devices(devices), options, None, None)
    }

    /// As [`load_split`](Self::load_split), for a model whose devices are
    /// spread over several processes (the ranks of an MPI job, each running
    /// the same calls): `remote` makes the runner's [`RemoteEdges`] (which
    /// devices are this process's, how crossings between processes travel).
    /// This process uploads only the weights of its own devices' layers;
    /// the others' are stand-ins. Every process gets the logits.
    pub fn load_over_ranks(
        path: impl AsRef<Path>,
        devices: impl IntoIterator<Item = impl IntoDevice>,
        options: &LoadOptions,
        remote: &MakeRemoteEdges<'_>,
    ) -> Result<Model, ModelError> {
        Self::load_with(path.as_ref(), into_devices(devices), options, None, Some(remote))
    }

    /// Loads the GGUF file at `path` with every layer's weights split over
    /// the inner devices of `device` (tensor parallelism, `--split-mode
    /// tensor`), in proportion to `options.tensor_split`; see
    /// [`TensorShares`](crate::TensorShares).
    pub fn load_tensor_parallel(
        path: impl AsRef<Path>,
        device: Arc<CompositeDevice>,
        options: &LoadOptions,
    ) -> Result<Model, ModelError> {
        Self::load_with(path.as_ref(), vec![device.clone().into_device()], options, Some(device), None)
    }

    pub(super) fn load_with(
        path: &Path,
        devices: Vec<Arc<dyn Device>>,
        options: &LoadOptions,
        tensor: Option<Arc<CompositeDevice>>,
        remote: Option<&MakeRemoteEdges<'_>>,
    ) -> Result<Model, ModelError> {
        if devices.is_empty() {
            return Err(ModelError::Input("no device to load the model on".into()));
        }
        // The memory the pool's default budget reads: what was free before
        // the weights were mapped or packed (their bytes are counted apart).
        let available = crate::host_memory_available();
        let file_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let handle = std::fs::File::open(path)
            .map_err(|source| baton_gguf::ReadError::Io { path: path.to_path_buf(), source })?;
        let file = GgufFile::map(&handle, path)?;
        let source = options.mmap.then_some(&handle);
        let config = LlamaConfig::from_gguf(&file)?;
        let tokenizer = crate::vocab::tokenizer_from_gguf(&file)?;
        let chat_template = file.metadata().get_str(CHAT_TEMPLATE_KEY).optional()?.map(str::to_string);
        if tokenizer.vocab_size() != config.vocab {
            return Err(ModelError::Config(format!(
                "the vocabulary has {} tokens, the model {}",
                tokenizer.vocab_size(),
                config.vocab
            )));
        }
        let expert_split = match (options.expert_split, &tensor) {
            (true, Some(_)) => {
                return Err(ModelError::Config("experts are split over devices or tensors are, not both".into()))
            }
            (true, None) if options.expert_devices.iter().any(Option::is_some) => {
                return Err(ModelError::Config(
                    "experts are placed on a device (--cpu-moe, --n-cpu-moe, -ot) or split over the devices (-sm expert), not both"
                        .into(),
                ))
            }
            (true, None) if !options.tensor_split.is_empty() => {
                return Err(ModelError::Config(
                    "-sm expert shares every layer's experts evenly: --tensor-split is not read there".into(),
                ))
            }
            (true, None) => Some(ExpertSplit::new(&config, devices.len(), options.tensor_exact)?),
            (false, _) => None,
        };
        let layer_device = match (&tensor, expert_split) {
            (Some(_), _) | (None, Some(_)) => vec![0; config.layers],
            (None, None) => layer_devices(config.layers, devices.len(), &options.tensor_split),
        };
        let expert_device = expert_devices(&config, &layer_device, &options.expert_devices, devices.len())?;
        if (tensor.is_some() || remote.is_some()) && expert_device != layer_device {
            return Err(ModelError::Config(
                "experts are placed apart from their layers on one process without a tensor split".into(),
            ));
        }
        check_cache_types(&devices, &layer_device, options.kv_types())?;
        check_experts(&file, &config, &devices, &expert_device)?;
        if expert_split.is_some() {
            check_expert_shares(&file, &config, &devices)?;
        }
        check_recurrent(&config, &devices, &layer_device)?;
        check_gemma4(&config, &devices, &layer_device)?;
        let in_slots = !options.attention_per_sequence && attend_in_slots(&devices, &layer_device, options.kv_types());
        let mut runner = Runner::new(devices.clone(), options.n_copies.max(1))?;
        runner.set_sync_copies(options.sync_copies);
        if let Some(remote) = remote {
            runner.set_remote(Some(remote(&runner)?));
        }
        let streams: Vec<_> = (0..devices.len()).map(|d| runner.stream(d).clone()).collect();
        let context = options.context.unwrap_or(config.context.min(4096)).max(1);
        let batch = options.batch.clamp(1, context);
        let ring = ring_rows(&config, batch, context);
        let paged = options.kv_blocks
            && in_slots
            && tensor.is_none()
            && remote.is_none()
            && attend_in_blocks(&devices, &layer_device, options.kv_types());
        let pool_size = match paged {
            true => {
                let whole = options.slots.max(1) * context.div_ceil(baton_core::graph::ATTENTION_BLOCK);
                let block_bytes = KvCache::pool_block_bytes(&config, (context, ring), options.kv_types());
                let size = options.kv_pool.size(whole, block_bytes, file_bytes, available)?;
                if let Some(budget) = size.budget {
                    tracing::warn!(
                        "KV pool of {} blocks ({} MiB) for {whole} blocks of every slot's context: what the memory \
                         budget ({} MiB: 90% of the host memory available at load, less the file and the memory \
                         reserved) holds",
                        size.blocks,
                        (size.blocks * size.block_bytes) >> 20,
                        budget >> 20,
                    );
                }
                Some(size)
            }
            false => None,
        };
        let pool = pool_size.map(|s| s.blocks);
        let (weights, cache, tensor) = match tensor {
            Some(c) => {
                let shares = TensorShares::new(&config, c.inner().len(), &options.tensor_split)?
                    .with_exact_sums(options.tensor_exact);
                let weights = Weights::load_tensor_parallel(&file, source, &config, &c, &streams[0], &shares)?;
                let slots = options.slots.max(1);
                let cache =
                    KvCache::new_tensor_parallel(&config, (context, slots, ring), options.kv_types(), &c, &shares)?;
                (weights, cache, Some((c, shares)))
            }
            None => {
                let device_of = |name: &str| match config.expert_weight_layer(name) {
                    Some(l) => expert_device[l],
                    None => layer_device[config.weight_layer(name)],
                };
                let local = |d| runner.is_local(d);
                let held = (&devices[..], &streams[..]);
                let weights = Weights::load(&file, source, &config, held, &device_of, &local, expert_split.as_ref())?;
                let slots = options.slots.max(1);
                let cache = KvCache::new(&config, (context, slots, ring, pool), options.kv_types(), &devices, &|l| {
                    layer_device[l]
                })?;
                (weights, cache, None)
            }
        };
        let first = layer_device[0];
        let last = layer_device[config.layers - 1];
        // A paged cache's tables go with each step's inputs.
        let table_entries = cache.blocks.as_ref().map_or(0, |b| cache.slots * b.per_slot());
        let input_io = (0..options.n_copies.max(1))
            .map(|_| Ok((devices[first].alloc(10 * batch * 4 + 64 + table_entries * 4)?, Vec::new())))
            .collect::<Result<Vec<_>, ModelError>>()?;
        let logits_io = devices[last].alloc(config.vocab * 4)?;
        let readback = match remote {
            Some(_) => None,
            None => devices[last].new_stream().ok(),
        };
        let batch_logits_io = (0..input_io.len())
            .map(|_| Ok((devices[last].alloc(cache.slots * config.vocab * 4)?, 0)))
            .collect::<Result<Vec<_>, ModelError>>()?;
        let mut bound: HashMap<String, TensorRef> = weights.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let mut attention_rows_bytes = 0;
        for (l, layer) in cache.layers.iter().enumerate() {
            let (k, v) = match layer {
                LayerCache::Attention(k, v) => (k, v),
                LayerCache::Recurrent(conv, delta) => {
                    bound.insert(graph::conv_state_name(l), conv.clone());
                    bound.insert(graph::delta_state_name(l), delta.clone());
                    continue;
                }
            };
            bound.insert(graph::key_cache_name(l), k.clone());
            bound.insert(graph::value_cache_name(l), v.clone());
            if cache.slots > 1 && !in_slots {
                // Where the attention outputs of a batch's sequences meet
                // when each has its own attention node (split by heads
                // under tensor parallelism); attention in slots writes
                // them in place.
                let width = config.heads * config.layer_attention(l).head_dim;
                let rows = match &tensor {
                    Some((composite, shares)) => {
                        composite.alloc_split(DType::F32, &[batch, width], shares.attention_rows())?
                    }
                    None => TensorRef::new(
                        &devices[layer_device[l]].alloc(batch * width * 4)?,
                        0,
                        DType::F32,
                        &[batch, width],
                    )?,
                };
                attention_rows_bytes += rows.bytes() as u64;
                bound.insert(graph::attention_rows_name(l), rows);
            }
        }
        let slot_count = cache.slots;
        let placed = match expert_split {
            Some(_) if remote.is_none() => Placement::ExpertShares,
            _ => Placement::of(&layer_device, tensor.is_some(), remote.is_some()),
        };
        Ok(Model {
            placed,
            tensor,
            config,
            tokenizer: Arc::new(tokenizer),
            devices,
            layer_device,
            expert_device,
            expert_split,
            delta_chunk: options.delta_chunk,
            runner,
            weights,
            cache,
            pool_size,
            bound,
            batch,
            in_slots,
            batch_hidden_io: vec![None; input_io.len()],
            input_io,
            next_input: 0,
            logits_io,
            attention_rows_bytes,
            batch_logits_io,
            readback,
            plans: Vec::new(),
            host_inputs: Some(Vec::new()),
            pending_inputs: None,
            host_logits: Some(Vec::new()),
            host_waits: 0,
            host_submit: std::time::Duration::ZERO,
            file_bytes,
            chat_template,
            evaluated_tokens: 0,
            frontier: vec![0; slot_count],
            kept: KeptRows::default(),
        })
    }

    /// Runs one decode step (token 0 at position 0 of slot 0) and drops
    /// its logits, so that what a backend does on a model's first step
    /// happens now rather than inside the first request: the CPU packs
    /// every matmul weight matrix for its kernels (`baton_cpu::set_repack`),
    /// the decode plan is built, scratch memory is touched. Position 0 of
    /// slot 0 is written, as any evaluation from position 0 overwrites it;
    /// [`evaluated_tokens`](Self::evaluated_tokens) does not count it.
    pub fn warm_up(&mut self) -> Result<(), ModelError> {
        let counted = self.evaluated_tokens;
        self.eval(&[0], 0, Logits::Last)?;
        self.evaluated_tokens = counted;
        Ok(())
    }
}

/// Whether every device holding layers attends in slots over a cache of
/// these types.
fn attend_in_slots(devices: &[Arc<dyn Device>], layer_device: &[usize], kv: KvTypes) -> bool {
    let op = Op::Attention { scale: 1.0, window: None, slot_rows: Some(1), sinks: false, paged: false };
    devices
        .iter()
        .enumerate()
        .filter(|(d, _)| layer_device.contains(d))
        .all(|(_, device)| device.supports(&op, kv.k) && device.supports(&op, kv.v))
}

/// Whether every device holding layers attends over a paged cache of
/// these types.
fn attend_in_blocks(devices: &[Arc<dyn Device>], layer_device: &[usize], kv: KvTypes) -> bool {
    let rows = baton_core::graph::ATTENTION_BLOCK;
    let op = Op::Attention { scale: 1.0, window: None, slot_rows: Some(rows), sinks: false, paged: true };
    devices
        .iter()
        .enumerate()
        .filter(|(d, _)| layer_device.contains(d))
        .all(|(_, device)| device.supports(&op, kv.k) && device.supports(&op, kv.v))
}

/// The device of each layer's router and experts: `placed` (per layer,
/// where given) or the layer's own. Experts placed apart need one process
/// and no tensor split.
fn expert_devices(
    config: &LlamaConfig,
    layer_device: &[usize],
    placed: &[Option<usize>],
    devices: usize,
) -> Result<Vec<usize>, ModelError> {
    if placed.iter().all(Option::is_none) {
        return Ok(layer_device.to_vec());
    }
    if config.experts.is_none() {
        return Err(ModelError::Config("experts placed on a device, but the model has no experts".into()));
    }
    if let Some(bad) = placed.iter().flatten().find(|&&d| d >= devices) {
        return Err(ModelError::Config(format!("experts placed on device {bad} of {devices}")));
    }
    Ok(layer_device.iter().enumerate().map(|(l, &d)| placed.get(l).copied().flatten().unwrap_or(d)).collect())
}

/// Refuses, before anything is loaded, experts on a device that does not
/// run the experts' product for their type (the Vulkan shaders), naming it.
fn check_experts(
    file: &GgufFile,
    config: &LlamaConfig,
    devices: &[Arc<dyn Device>],
    layer_device: &[usize],
) -> Result<(), ModelError> {
    if config.experts.is_none() {
        return Ok(());
    }
    for (l, &d) in layer_device.iter().enumerate() {
        let name = format!("blk.{l}.ffn_up_exps.weight");
        let Some(tensor) = file.tensor(&name) else { continue };
        let Some(dtype) = DType::from_ggml_id(tensor.ggml_type().id()) else { continue };
        let device = &devices[d];
        if !device.supports(&Op::MatMulId, dtype) || !device.supports(&Op::TopK { k: 1 }, DType::F32) {
            return Err(ModelError::Config(format!(
                "{} does not run a mixture of experts ({dtype} experts of layer {l}): place those layers on the CPU",
                device.info().name
            )));
        }
    }
    Ok(())
}

/// Refuses, before anything is loaded, an expert split over a device that
/// does not run the product by a share of the experts for their type.
fn check_expert_shares(file: &GgufFile, config: &LlamaConfig, devices: &[Arc<dyn Device>]) -> Result<(), ModelError> {
    let name = "blk.0.ffn_up_exps.weight";
    let Some(dtype) = file.tensor(name).and_then(|t| DType::from_ggml_id(t.ggml_type().id())) else {
        return Err(ModelError::MissingTensor(name.into()));
    };
    let op = Op::MatMulIdShare { first: 0 };
    match devices.iter().find(|d| !d.supports(&op, dtype)) {
        Some(device) => Err(ModelError::Config(format!(
            "{} does not run a share of a mixture's experts ({dtype} experts of {} layers): split them over CPUs",
            device.info().name,
            config.layers
        ))),
        None => Ok(()),
    }
}

/// Refuses, before anything is loaded, a hybrid model's recurrent layers
/// on a device that does not run their ops (the Vulkan shaders), naming it.
fn check_recurrent(
    config: &LlamaConfig,
    devices: &[Arc<dyn Device>],
    layer_device: &[usize],
) -> Result<(), ModelError> {
    let Some(recurrent) = &config.recurrent else { return Ok(()) };
    let ops =
        [Op::SsmConv, Op::GatedDeltaNet { scale: 1.0, chunk: 0 }, Op::L2Norm { eps: 1e-6 }, Op::Softplus, Op::Sigmoid];
    for (l, &d) in layer_device.iter().enumerate() {
        let device = &devices[d];
        if recurrent.is_recurrent(l) && !ops.iter().all(|op| device.supports(op, DType::F32)) {
            return Err(ModelError::Config(format!(
                "{} does not run the recurrent layers of a hybrid model (layer {l}): place those layers on the CPU",
                device.info().name
            )));
        }
    }
    Ok(())
}

/// Refuses, before anything is loaded, a Gemma 4 layer on a device that
/// does not rotate part of a head (its full layers' RoPE), and a layer that
/// reads an earlier layer's keys and values on another device than that
/// layer (the cache is read in place).
fn check_gemma4(config: &LlamaConfig, devices: &[Arc<dyn Device>], layer_device: &[usize]) -> Result<(), ModelError> {
    if config.gemma4.is_none() {
        return Ok(());
    }
    for (l, &d) in layer_device.iter().enumerate() {
        let layer = config.layer_attention(l);
        let rope = Op::Rope {
            mode: config.rope_mode,
            dims: layer.rope_dims,
            freq_base: layer.rope_base,
            freq_scale: layer.rope_scale,
            yarn: None,
            rotated_pairs: layer.rotated_pairs,
        };
        if !devices[d].supports(&rope, DType::F32) {
            return Err(ModelError::Config(format!(
                "{} does not run Gemma 4's partly rotated RoPE (layer {l}): place its layers on the CPU",
                devices[d].info().name
            )));
        }
        let source = config.kv_source(l);
        if layer_device[source] != d {
            return Err(ModelError::Config(format!(
                "layer {l} reads layer {source}'s keys and values (gemma4.attention.shared_kv_layers), which another device holds: split the layers so that they share a device"
            )));
        }
    }
    Ok(())
}

/// Refuses, before anything is loaded, a KV cache type that a device
/// holding layers cannot attend over.
fn check_cache_types(devices: &[Arc<dyn Device>], layer_device: &[usize], kv: KvTypes) -> Result<(), ModelError> {
    let op = Op::Attention { scale: 1.0, window: None, slot_rows: None, sinks: false, paged: false };
    for (d, device) in devices.iter().enumerate() {
        if layer_device.contains(&d) && !(device.supports(&op, kv.k) && device.supports(&op, kv.v)) {
            return Err(ModelError::Config(format!(
                "{} cannot hold a KV cache of {} keys and {} values",
                device.info().name,
                kv.k,
                kv.v
            )));
        }
    }
    Ok(())
}
