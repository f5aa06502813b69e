//! A step: the tokens of one or more sequences evaluated in one batched
//! pass, submitted without waiting (several in flight over a layer split)
//! and its logits read, waiting for that step's own point only.

use super::*;

impl Model {
    /// The plan of `shape` and the tensors bound to its graph's nodes.
    pub(super) fn plan_and_bound(&mut self, shape: &BatchShape) -> Result<(Arc<Plan>, BoundByNode), ModelError> {
        if let Some(i) = self.plans.iter().position(|(s, _, _)| s == shape) {
            // Most recently used last: the oldest is evicted first.
            let entry = self.plans.remove(i);
            let found = (entry.1.clone(), entry.2.clone());
            self.plans.push(entry);
            return Ok(found);
        }
        let geometry = CacheGeometry {
            dtypes: self.cache.dtypes,
            context: self.cache.context,
            ring: self.cache.ring,
            slots: self.cache.slots,
            batch: self.batch,
            experts_apart: self.expert_device != self.layer_device,
            pool: self.cache.blocks.as_ref().map(|b| b.blocks()),
            expert_split: self.expert_split,
            delta_chunk: self.delta_chunk,
            kept_rows: self.kept.leaf_rows(),
        };
        let graph: Arc<Graph> = Arc::new(graph::build(&self.config, &Types(&self.weights), shape, geometry)?);
        let (config, layer_device) = (&self.config, &self.layer_device);
        let expert_device = &self.expert_device;
        let group_device = |g: u32| match graph::group_place(config, g) {
            graph::GroupPlace::Layer(l) => Some(layer_device[l]),
            graph::GroupPlace::Experts(l) => Some(expert_device[l]),
            graph::GroupPlace::ExpertShare(_, device) => Some(device),
        };
        let first = layer_device[0];
        let g2 = graph.clone();
        let bound = &self.bound;
        let leaf_device = |id: baton_core::graph::NodeId| {
            let name = g2.node(id).name.as_deref()?;
            match name {
                "tokens"
                | "positions"
                | graph::LOGIT_ROWS
                | graph::HIDDEN_ROWS
                | graph::SLOTS
                | graph::CACHE_ROWS
                | graph::RING_CACHE_ROWS
                | graph::STATE_SLOTS
                | graph::STATE_KEEP
                | graph::BLOCK_TABLE => Some(first),
                _ => {
                    bound.get(name).and_then(|t| self.devices.iter().position(|d| d.info().name == t.buffer().device()))
                }
            }
        };
        let plan = Arc::new(Plan::new(graph.clone(), &self.runner, &group_device, &leaf_device)?);
        if self.plans.len() == PLAN_CACHE {
            self.plans.remove(0);
        }
        let by_node: Vec<Option<TensorRef>> = graph
            .nodes()
            .iter()
            .map(|n| match n.name.as_deref() {
                // Bound per step (submit_inner).
                Some(
                    "tokens"
                    | "positions"
                    | "logits"
                    | graph::HIDDEN
                    | graph::LOGIT_ROWS
                    | graph::HIDDEN_ROWS
                    | graph::SLOTS
                    | graph::CACHE_ROWS
                    | graph::RING_CACHE_ROWS
                    | graph::STATE_SLOTS
                    | graph::STATE_KEEP
                    | graph::BLOCK_TABLE,
                )
                | None => None,
                Some(name) => self.bound.get(name).cloned(),
            })
            .collect();
        let by_node = Arc::new(by_node);
        self.plans.push((shape.clone(), plan.clone(), by_node.clone()));
        Ok((plan, by_node))
    }

    /// Checks a step's sequences: tokens, slots, room in the cache.
    pub(super) fn check(&self, seqs: &[SeqStep<'_>], logits: Logits) -> Result<(), ModelError> {
        if seqs.is_empty() {
            return Err(ModelError::Input("a batch needs at least one sequence".into()));
        }
        if matches!(logits, Logits::All | Logits::Hidden) && seqs.len() > 1 {
            return Err(ModelError::Input("every token's logits are for one sequence at a time".into()));
        }
        let t: usize = seqs.iter().map(|s| s.tokens.len()).sum();
        if t > self.batch || seqs.iter().any(|s| s.tokens.is_empty()) {
            return Err(ModelError::Input(format!(
                "an evaluation takes 1 to {} tokens, at least one per sequence, not {t}",
                self.batch
            )));
        }
        for (i, seq) in seqs.iter().enumerate() {
            if seq.slot >= self.cache.slots {
                return Err(ModelError::Input(format!(
                    "slot {} does not exist: the cache holds {} sequences",
                    seq.slot, self.cache.slots
                )));
            }
            if seqs[..i].iter().any(|other| other.slot == seq.slot) {
                return Err(ModelError::Input(format!("slot {} is twice in one batch", seq.slot)));
            }
            let needed = seq.past + seq.tokens.len();
            if needed > self.cache.context {
                return Err(ModelError::ContextFull { needed, context: self.cache.context });
            }
            // A ring still holds the window before `past` unless a longer
            // run since went more than its spare rows past it.
            if self.config.recurrent.is_some() && !self.resumable(seq.slot, seq.past) {
                let at = self.frontier[seq.slot];
                return Err(ModelError::StateRewound { slot: seq.slot, past: seq.past, at });
            }
            if let Some(reach) = self.ring_reach().filter(|_| !self.resumable(seq.slot, seq.past)) {
                return Err(ModelError::RingRewound { slot: seq.slot, past: seq.past, reach });
            }
            if let Some(&bad) = seq.tokens.iter().find(|&&id| id as usize >= self.config.vocab) {
                return Err(ModelError::Input(format!(
                    "token id {bad} is outside the vocabulary of {}",
                    self.config.vocab
                )));
            }
        }
        Ok(())
    }

    /// Queues the evaluation of `seqs` without waiting for it, the logits
    /// into `logits_buffer` if given (else the model's own); returns its
    /// points and the logits tensor it fills.
    pub(super) fn submit(
        &mut self,
        seqs: &[SeqStep<'_>],
        logits: Logits,
        logits_buffer: Option<&Buffer>,
    ) -> Result<(RunPoints, TensorRef), ModelError> {
        let start = std::time::Instant::now();
        let result = self.submit_inner(seqs, logits, logits_buffer, None, None);
        self.host_submit += start.elapsed();
        result.map(|(points, logits, _)| (points, logits))
    }

    /// As [`submit`](Self::submit); with `hidden` (a flag per sequence and
    /// a buffer), the final hidden states of every token of the flagged
    /// sequences are an output too, into that buffer; with `every_logit`
    /// (a flag per sequence, several sequences and [`Logits::Last`]), the
    /// flagged sequences give a logits row per token, the others their
    /// last token's.
    pub(super) fn submit_inner(
        &mut self,
        seqs: &[SeqStep<'_>],
        logits: Logits,
        logits_buffer: Option<&Buffer>,
        hidden: Option<(&[bool], &Buffer)>,
        every_logit: Option<&[bool]>,
    ) -> Result<(RunPoints, TensorRef, Option<TensorRef>), ModelError> {
        self.check(seqs, logits)?;
        let t: usize = seqs.iter().map(|s| s.tokens.len()).sum();
        // The rows that give logits, in a batch of several sequences: each
        // sequence's last, or each of its rows when flagged.
        let logit_rows: Vec<i32> = match seqs.len() > 1 {
            true => {
                let every = |i: usize| every_logit.is_some_and(|flags| flags.get(i) == Some(&true));
                let mut start = 0;
                let mut rows = Vec::with_capacity(seqs.len());
                for (i, s) in seqs.iter().enumerate() {
                    let end = start + s.tokens.len();
                    match every(i) {
                        true => rows.extend((start..end).map(|r| r as i32)),
                        false => rows.push(end as i32 - 1),
                    }
                    start = end;
                }
                rows
            }
            false => Vec::new(),
        };
        // The rows whose hidden states are asked for.
        let hidden_rows: Vec<i32> = match hidden {
            Some((flags, _)) => {
                let mut start = 0;
                let mut rows = Vec::new();
                for (s, &wanted) in seqs.iter().zip(flags) {
                    if wanted {
                        rows.extend((start..start + s.tokens.len()).map(|r| r as i32));
                    }
                    start += s.tokens.len();
                }
                rows
            }
            None => Vec::new(),
        };
        let context = self.cache.context;
        // A paged cache: each sequence's blocks for its new positions (and
        // copies of blocks shared with another slot that it writes into),
        // queued before the step.
        let paged = self.cache.blocks.is_some();
        if let Some(tables) = self.cache.blocks.as_mut() {
            // Each sequence's blocks are taken in turn: when one finds the
            // pool full, the copies of those before it are queued all the
            // same (their tables already name the copies), so every slot
            // still reads what it wrote and the step can be tried again.
            let mut copies = Vec::new();
            let mut full = None;
            for s in seqs {
                match tables.prepare(s.slot, s.past, s.past + s.tokens.len()) {
                    Ok(more) => copies.extend(more),
                    Err(e) => {
                        full = Some(e);
                        break;
                    }
                }
            }
            let (runner, layer_device) = (&self.runner, &self.layer_device);
            self.cache.copy_blocks(&self.config, &copies, &|l| runner.stream(layer_device[l]).clone())?;
            if let Some(full) = full {
                return Err(full.into());
            }
        }
        // In slots, the graph depends on the token counts only (a paged
        // cache is always read in slots).
        let in_slots = self.in_slots && (seqs.len() > 1 || paged);
        let shape = BatchShape {
            seqs: seqs
                .iter()
                .map(|s| match in_slots {
                    true => SeqShape { slot: 0, tokens: s.tokens.len(), window: 0 },
                    false => {
                        let window = GraphShape::new(s.tokens.len(), s.past, logits, context).window;
                        SeqShape { slot: s.slot, tokens: s.tokens.len(), window }
                    }
                })
                .collect(),
            logits,
            logit_rows: if logit_rows.len() == seqs.len() { 0 } else { logit_rows.len() },
            hidden_rows: hidden_rows.len(),
            in_slots,
        };
        let (plan, by_node) = self.plan_and_bound(&shape)?;
        let rows = match logits {
            Logits::All | Logits::Hidden => t,
            Logits::Last => logit_rows.len().max(1),
        };
        let width = if logits == Logits::Hidden { self.config.dim } else { self.config.vocab };
        let picks = logit_rows.len();
        let slot = self.next_input;
        self.next_input = (slot + 1) % self.input_io.len();
        let io = self.input_io[slot].0.clone();
        let ring = self.cache.ring;
        let ring_len = if ring.is_some() { t } else { 0 };
        let in_slots_len = if in_slots { 2 * t + ring_len } else { 0 };
        let state_slots_len = if self.config.recurrent.is_some() { t } else { 0 };
        // The kept state of each row (`rewind.rs`): the sequences whose
        // every row gives logits keep theirs.
        let keep = match self.kept.rows() {
            0 => Vec::new(),
            _ => {
                let every = |i: usize| every_logit.is_some_and(|flags| flags.get(i) == Some(&true));
                let seqs: Vec<_> = (seqs.iter().enumerate())
                    .map(|(i, s)| (s.slot, s.past, s.tokens.len(), logits == Logits::All || every(i)))
                    .collect();
                self.kept.assign(slot, &seqs)
            }
        };
        let table_len = self.cache.blocks.as_ref().map_or(0, |b| self.cache.slots * b.per_slot());
        let inputs_len = 2 * t
            + picks.max(1)
            + ring_len
            + hidden_rows.len()
            + in_slots_len
            + table_len
            + state_slots_len
            + keep.len();
        let inputs_t = TensorRef::new(&io, 0, DType::I32, &[inputs_len])?;
        let ids_t = TensorRef::new(&io, 0, DType::I32, &[t])?;
        let pos_t = TensorRef::new(&io, t * 4, DType::I32, &[t])?;
        let picks_t = TensorRef::new(&io, 2 * t * 4, DType::I32, &[picks.max(1)])?;
        let ring_t = TensorRef::new(&io, (2 * t + picks.max(1)) * 4, DType::I32, &[t])?;
        let hidden_at = (2 * t + picks.max(1) + ring_len) * 4;
        let hidden_rows_t = TensorRef::new(&io, hidden_at, DType::I32, &[hidden_rows.len().max(1)])?;
        // In slots: each token's slot, then its rows in the whole caches.
        let slots_at = hidden_at + hidden_rows.len() * 4;
        let slot_inputs: Vec<TensorRef> = match in_slots {
            true => {
                (0..3).map(|i| TensorRef::new(&io, slots_at + i * t * 4, DType::I32, &[t])).collect::<Result<_, _>>()?
            }
            false => Vec::new(),
        };
        // A paged cache's block tables, after the slot inputs.
        let table_t = match &self.cache.blocks {
            Some(b) => {
                let at = slots_at + in_slots_len * 4;
                Some(TensorRef::new(&io, at, DType::I32, &[self.cache.slots, b.per_slot()])?)
            }
            None => None,
        };
        // A hybrid model's recurrent layers: each token's slot, then its
        // kept state, last.
        let state_slots_t = match state_slots_len {
            0 => None,
            _ => Some(TensorRef::new(&io, (inputs_len - keep.len() - t) * 4, DType::I32, &[t])?),
        };
        let keep_t = match keep.len() {
            0 => None,
            _ => Some(TensorRef::new(&io, (inputs_len - t) * 4, DType::I32, &[t])?),
        };
        let hidden_t = match hidden {
            Some((_, buffer)) if !hidden_rows.is_empty() => {
                Some(TensorRef::new(buffer, 0, DType::F32, &[hidden_rows.len(), self.config.dim])?)
            }
            _ => None,
        };
        let needed = rows * width * 4;
        if logits_buffer.is_none() && self.logits_io.len() < needed {
            // Runs in flight hold the old buffer until they are done.
            let last = self.layer_device[self.config.layers - 1];
            self.logits_io = self.devices[last].alloc(needed)?;
        }
        let logits_t = TensorRef::new(logits_buffer.unwrap_or(&self.logits_io), 0, DType::F32, &[rows, width])?;
        if let Some(written) = self.pending_inputs.take() {
            // Done long ago in practice (earlier on the stream than the last
            // logits); a real wait is counted.
            if !written.is_ready() {
                self.host_waits += 1;
            }
            self.host_inputs = Some(written.wait().map_err(|e| ModelError::Stream(e.error))?);
        }
        // In slots, each token's row of its layers' caches: of the pool
        // (a block its slot holds, prepared above), or of the slot.
        let mut cache_rows = Vec::with_capacity(if in_slots { t } else { 0 });
        for s in seqs.iter().filter(|_| in_slots) {
            for p in s.past..s.past + s.tokens.len() {
                cache_rows.push(match &self.cache.blocks {
                    Some(tables) => tables
                        .row(s.slot, p)
                        .ok_or_else(|| ModelError::Config(format!("slot {} holds no block for position {p}", s.slot)))?
                        as i32,
                    None => (s.slot * context + p) as i32,
                });
            }
        }
        // Token ids, then positions, then (several sequences) the row of
        // each one's last token.
        let mut inputs = self.host_inputs.take().unwrap_or_default();
        inputs.clear();
        inputs.extend(seqs.iter().flat_map(|s| s.tokens.iter().map(|&id| id as i32)));
        inputs.extend(seqs.iter().flat_map(|s| (s.past..s.past + s.tokens.len()).map(|p| p as i32)));
        if picks > 0 {
            inputs.extend_from_slice(&logit_rows);
        } else {
            inputs.push(0);
        }
        if let Some(rows) = ring {
            inputs.extend(seqs.iter().flat_map(|s| (s.past..s.past + s.tokens.len()).map(|p| (p % rows) as i32)));
        }
        inputs.extend_from_slice(&hidden_rows);
        if in_slots {
            let each = |s: &SeqStep<'_>| std::iter::repeat_n(s.slot, s.tokens.len()).zip(s.past..);
            inputs.extend(seqs.iter().flat_map(|s| each(s).map(|(slot, _)| slot as i32)));
            inputs.extend_from_slice(&cache_rows);
            if let Some(rows) = ring {
                inputs.extend(seqs.iter().flat_map(|s| each(s).map(|(slot, p)| (slot * rows + p % rows) as i32)));
            }
        }
        if let Some(tables) = &self.cache.blocks {
            tables.write_entries(&mut inputs);
        }
        if state_slots_len > 0 {
            inputs.extend(seqs.iter().flat_map(|s| std::iter::repeat_n(s.slot as i32, s.tokens.len())));
        }
        inputs.extend_from_slice(&keep);
        let stream = self.runner.stream(self.layer_device[0]).clone();
        // The run that used this buffer last may still read it on another
        // device: this stream waits for that (no host wait).
        for p in std::mem::take(&mut self.input_io[slot].1) {
            stream.wait_or_relay(&p, stream.wait_policy())?;
        }
        let written: Pending<Vec<i32>> = stream.write_async(&inputs_t, inputs)?;
        let ready: SyncPoint = written.point().clone();
        let graph = plan.graph.clone();
        let bind = |id: baton_core::graph::NodeId| -> Option<TensorRef> {
            if let Some(t) = by_node.get(id.0).and_then(Option::as_ref) {
                return Some(t.clone());
            }
            match graph.node(id).name.as_deref()? {
                "tokens" => Some(ids_t.clone()),
                "positions" => Some(pos_t.clone()),
                graph::LOGIT_ROWS => Some(picks_t.clone()),
                graph::RING_ROWS => Some(ring_t.clone()),
                graph::HIDDEN_ROWS => Some(hidden_rows_t.clone()),
                graph::SLOTS => slot_inputs.first().cloned(),
                graph::CACHE_ROWS => slot_inputs.get(1).cloned(),
                graph::RING_CACHE_ROWS => slot_inputs.get(2).cloned(),
                graph::STATE_SLOTS => state_slots_t.clone(),
                graph::STATE_KEEP => keep_t.clone(),
                graph::BLOCK_TABLE => table_t.clone(),
                graph::HIDDEN if hidden_t.is_some() => hidden_t.clone(),
                "logits" | graph::HIDDEN => Some(logits_t.clone()),
                _ => None,
            }
        };
        let points = self.runner.submit(&plan, &bind, Some(&ready))?;
        self.input_io[slot].1 = points.inputs_read.clone();
        // The write is ordered before the run's first split on the same
        // stream; its buffer comes back at the next submit.
        self.pending_inputs = Some(written);
        self.evaluated_tokens += t as u64;
        for s in seqs {
            let end = s.past + s.tokens.len();
            let frontier = &mut self.frontier[s.slot];
            *frontier = if s.past == 0 { end } else { (*frontier).max(end) };
        }
        Ok((points, logits_t, hidden_t))
    }

    /// Waits for the logits a submitted run fills and returns them; with
    /// `done` (the run's point), on the readback stream after that point.
    pub(super) fn read_logits(&mut self, logits_t: &TensorRef, done: Option<&SyncPoint>) -> Result<&[f32], ModelError> {
        let mut host_logits = self.host_logits.take().unwrap_or_default();
        host_logits.resize(logits_t.shape().elems(), 0.0);
        let last = self.layer_device[self.config.layers - 1];
        let stream = match (done, &self.readback) {
            (Some(done), Some(readback)) => {
                readback.wait(done)?;
                readback
            }
            _ => self.runner.stream(last),
        };
        let read = stream.read_into_async(logits_t, host_logits)?;
        if !read.is_ready() {
            self.host_waits += 1;
        }
        let mut host_logits = read.wait().map_err(|e| ModelError::Stream(e.error))?;
        if let Some(remote) = self.runner.remote() {
            remote.share(&mut host_logits, last)?;
        }
        self.host_logits = Some(host_logits);
        Ok(self.host_logits.as_deref().unwrap_or(&[]))
    }

    /// Evaluates one step of several sequences at once, each in its own
    /// KV cache slot: `seqs[i].tokens` go to positions `past..` of slot
    /// `seqs[i].slot` (distinct slots, at most [`batch`](Self::batch) tokens
    /// in all). Returns one row of `vocab` logits per sequence, in order:
    /// its last token's.
    ///
    /// Every weight is read once for the whole batch; attention runs per
    /// sequence on its own slot. A sequence's logits do not depend on the
    /// others in the batch: they are bit for bit what it gets evaluated
    /// alone in the same slot with the same tokens (the kernels' results
    /// per row do not depend on the other rows).
    pub fn eval_batch(&mut self, seqs: &[SeqStep<'_>]) -> Result<&[f32], ModelError> {
        let ticket = self.submit_batch(seqs)?;
        self.batch_logits(ticket)
    }

    /// Queues a step as [`eval_batch`](Self::eval_batch) does, without
    /// waiting for it: up to [`runs_in_flight`](Self::runs_in_flight) steps
    /// (of disjoint sequences) flow through the devices at once, so over a
    /// layer split one device works on one step while the next works on
    /// another. Read each step's logits with
    /// [`batch_logits`](Self::batch_logits), in any order, before
    /// `runs_in_flight` more steps are submitted.
    pub fn submit_batch(&mut self, seqs: &[SeqStep<'_>]) -> Result<BatchTicket, ModelError> {
        let slot = self.next_input;
        let buffer = self.batch_logits_io.get(slot).map(|(buffer, _)| buffer.clone());
        let (points, logits) = self.submit(seqs, Logits::Last, buffer.as_ref())?;
        let serial = self.next_serial(slot);
        Ok(BatchTicket { slot, serial, done: points.done, logits, hidden: None })
    }

    /// As [`submit_batch_hidden`](Self::submit_batch_hidden), and the
    /// sequences `every_logit` flags give a logits row per token (the
    /// others their last token's): a prompt's score carried by a decode
    /// step. [`batch_logits`](Self::batch_logits) returns the rows in
    /// order, each flagged sequence's rows together. Every row is computed
    /// as it would be alone (the rows of a sequence scored alone with
    /// [`Logits::All`] have the same bits). On one process without tensor
    /// parallelism only.
    pub fn submit_batch_rows(
        &mut self,
        seqs: &[SeqStep<'_>],
        hidden: &[bool],
        every_logit: &[bool],
    ) -> Result<BatchTicket, ModelError> {
        if hidden.len() != seqs.len() || every_logit.len() != seqs.len() {
            return Err(ModelError::Input(format!(
                "{} hidden and {} logits flags for {} sequences",
                hidden.len(),
                every_logit.len(),
                seqs.len()
            )));
        }
        if !self.hidden_in_steps() {
            return Err(ModelError::Input(
                "every token's logits in a step are read on one process without --split-mode tensor".into(),
            ));
        }
        let slot = self.next_input;
        let rows: usize = seqs.iter().zip(every_logit).map(|(s, &every)| if every { s.tokens.len() } else { 1 }).sum();
        let needed = rows * self.config.vocab * 4;
        if self.batch_logits_io[slot].0.len() < needed {
            // Grown once to a whole batch's rows; a step in flight keeps
            // the buffer it was given (its ticket holds it).
            let last = self.layer_device[self.config.layers - 1];
            let size = needed.max(self.batch * self.config.vocab * 4);
            self.batch_logits_io[slot].0 = self.devices[last].alloc(size)?;
        }
        let wants_hidden = hidden.contains(&true);
        if wants_hidden && self.batch_hidden_io[slot].is_none() {
            let last = self.layer_device[self.config.layers - 1];
            self.batch_hidden_io[slot] = Some(self.devices[last].alloc(self.batch * self.config.dim * 4)?);
        }
        let logits_buffer = self.batch_logits_io[slot].0.clone();
        let hidden_buffer = match wants_hidden {
            true => {
                Some(self.batch_hidden_io[slot].clone().ok_or_else(|| ModelError::Config("no hidden buffer".into()))?)
            }
            false => None,
        };
        // One sequence alone gives its every row as a plain evaluation does.
        let logits = if seqs.len() == 1 && every_logit[0] { Logits::All } else { Logits::Last };
        let start = std::time::Instant::now();
        let hidden_io = hidden_buffer.as_ref().map(|buffer| (hidden, buffer));
        let result = self.submit_inner(seqs, logits, Some(&logits_buffer), hidden_io, Some(every_logit));
        self.host_submit += start.elapsed();
        let (points, logits, hidden) = result?;
        let serial = self.next_serial(slot);
        Ok(BatchTicket { slot, serial, done: points.done, logits, hidden })
    }

    /// The next serial of run slot `slot`'s buffers.
    pub(super) fn next_serial(&mut self, slot: usize) -> u64 {
        match self.batch_logits_io.get_mut(slot) {
            Some((_, serial)) => {
                *serial += 1;
                *serial
            }
            None => 0,
        }
    }

    /// Waits for a submitted step and returns its logits: one row of
    /// `vocab` per sequence, in order. An error if `runs_in_flight` later
    /// steps have reused its buffer since.
    pub fn batch_logits(&mut self, ticket: BatchTicket) -> Result<&[f32], ModelError> {
        let current = self.batch_logits_io.get(ticket.slot).map_or(0, |(_, serial)| *serial);
        if current != ticket.serial {
            return Err(ModelError::Input(format!(
                "the step's logits were overwritten: {} later steps were submitted before they were read",
                self.input_io.len()
            )));
        }
        self.read_logits(&ticket.logits, Some(&ticket.done))
    }

    /// Evaluates `tokens` at positions `past..past + tokens.len()` of slot 0
    /// (at most [`batch`](Self::batch) tokens), writing their keys and values into the
    /// cache, and returns the logits: one row of `vocab` for the last token,
    /// or one per token with [`Logits::All`]. The host waits once, for the
    /// logits (their read waits for its own point only).
    pub fn eval(&mut self, tokens: &[u32], past: usize, logits: Logits) -> Result<&[f32], ModelError> {
        self.eval_slot(0, tokens, past, logits)
    }

    /// As [`eval`](Self::eval), on sequence slot `slot` of the cache.
    pub fn eval_slot(
        &mut self,
        slot: usize,
        tokens: &[u32],
        past: usize,
        logits: Logits,
    ) -> Result<&[f32], ModelError> {
        let (_, logits_t) = self.submit(&[SeqStep { slot, past, tokens }], logits, None)?;
        self.read_logits(&logits_t, None)
    }

    /// Evaluates a prompt of any length from position `past` in batches of
    /// [`batch`](Self::batch) (`-ub`), which flow through the devices as a
    /// pipeline (up to `n_copies` in flight); returns the last token's
    /// logits.
    pub fn eval_prompt(&mut self, tokens: &[u32], past: usize) -> Result<&[f32], ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::Input("the prompt is empty".into()));
        }
        let batch = self.batch;
        let chunks = tokens.len().div_ceil(batch);
        for (i, chunk) in tokens.chunks(batch).enumerate().take(chunks - 1) {
            self.submit(&[SeqStep { slot: 0, past: past + i * batch, tokens: chunk }], Logits::Last, None)?;
        }
        let last = chunks - 1;
        self.eval(&tokens[last * batch..], past + last * batch, Logits::Last)
    }
}
