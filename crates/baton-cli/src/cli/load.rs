//! The model `ModelArgs` name, loaded and placed as they say, and its trace
//! and sync profile reported after the work.

use anyhow::{Context, Result};
use baton_model::{LoadOptions, Model};

use super::args::ModelArgs;
use super::choices::{gate_policy, CacheType};

impl ModelArgs {
    /// What the model is loaded with, with `slots` sequences.
    fn options(&self, slots: usize) -> LoadOptions {
        LoadOptions {
            context: self.context,
            cache_type: self.cache_type_k.or(self.cache_type).unwrap_or(CacheType::F16).dtype(),
            cache_type_v: Some(self.cache_type_v.or(self.cache_type).unwrap_or(CacheType::F16).dtype()),
            batch: self.batch,
            tensor_split: self.tensor_split.clone(),
            n_copies: self.n_copies.max(1),
            sync_copies: self.sync_copies,
            tensor_exact: self.tensor_exact,
            mmap: !self.no_mmap,
            attention_per_sequence: self.attention_per_sequence,
            kv_blocks: !self.kv_slots,
            kv_pool: match (self.kv_pool, self.kv_pool_blocks) {
                (Some(pool), _) => pool,
                (None, Some(blocks)) => baton_model::KvPool::Blocks(blocks as usize),
                (None, None) => baton_model::KvPool::Budget { reserve: self.kv_reserve },
            },
            expert_devices: Vec::new(),
            expert_split: self.split_mode == baton_load::SplitMode::Expert,
            delta_chunk: self.delta_chunk,
            slots,
        }
    }

    /// Loads the model on the first device of the list.
    pub fn load(&self) -> Result<Model> {
        self.load_slots(1)
    }

    /// Loads the model with `slots` sequences in its KV cache
    /// (`baton serve --parallel`), each of `-c` positions.
    pub fn load_slots(&self, slots: usize) -> Result<Model> {
        #[cfg(feature = "mpi")]
        return Ok(self.load_slots_linked(slots)?.0);
        #[cfg(not(feature = "mpi"))]
        self.load_slots_here(slots)
    }

    /// As [`load_slots`](Self::load_slots), with the link a server over
    /// the ranks of an MPI job speaks on (`None` in one process).
    #[cfg(feature = "mpi")]
    pub fn load_slots_linked(&self, slots: usize) -> Result<(Model, Option<super::rank_model::RankLink>)> {
        if super::ranks::launched_by_mpirun() && super::rank_model::names_ranks(&self.devices) {
            if self.cpu_moe || self.n_cpu_moe.is_some() || !self.override_tensor.is_empty() {
                anyhow::bail!("--cpu-moe, --n-cpu-moe and -ot place experts in one process, not over MPI ranks");
            }
            let path = self.path()?;
            let options = self.options(slots);
            if self.no_repack {
                baton_cpu::set_repack(false);
            }
            let (mut model, link) = super::rank_model::load_linked(self, &path, &options)?;
            // Every rank runs the same command, so every rank takes this
            // step at the same point: it is collective like any other.
            model.warm_up().context("the warm-up step after loading")?;
            if self.trace.is_some() || self.sync_profile {
                model.set_trace(Some(baton_sched::Trace::new()));
            }
            return Ok((model, Some(link)));
        }
        Ok((self.load_slots_here(slots)?, None))
    }

    /// Loads the model in this process.
    fn load_slots_here(&self, slots: usize) -> Result<Model> {
        let path = self.path()?;
        let mut options = self.options(slots);
        if self.no_repack {
            baton_cpu::set_repack(false);
        }
        let mut list = self.devices.clone();
        if let Some(placed) = super::experts::place(self, &path)? {
            list = placed.devices;
            options.tensor_split = placed.tensor_split;
            options.expert_devices = placed.expert_devices;
        }
        let devices = super::devices::open(&list, self.threads)?;
        let mut model =
            baton_load::load_model(&path, devices, self.split_mode, gate_policy(self.gate_policy), &options)?;
        if self.trace.is_some() || self.sync_profile {
            model.set_trace(Some(baton_sched::Trace::new()));
        }
        if let (true, Some((device, _))) = (self.sync_profile, model.tensor_parallel()) {
            device.gate_profile().enable(true);
        }
        Ok(model)
    }

    /// Writes the trace (if `--trace` was given) and prints each stream's
    /// busy share.
    pub fn finish_trace(&self, model: &Model) -> Result<()> {
        let Some(trace) = model.trace() else { return Ok(()) };
        if self.sync_profile {
            eprintln!("sync profile (waits on other devices' points against work, over the traced span):");
            for p in trace.gate_profile() {
                eprintln!(
                    "  {}: {} gates, waiting {:.2} ms ({:.1}% of the span, median {:.1} us), working {:.2} ms ({:.1}%)",
                    p.stream,
                    p.gates,
                    p.wait_us / 1e3,
                    100.0 * p.wait_us / p.span_us,
                    p.wait_p50_us,
                    p.work_us / 1e3,
                    100.0 * p.work_us / p.span_us
                );
            }
        }
        if let (true, Some((device, _))) = (self.sync_profile, model.tensor_parallel()) {
            let span = device.gate_profile().span().as_secs_f64();
            eprintln!("gates of --split-mode tensor, per inner device (reaching a gate to leaving it: waiting for the others, copies, adds), over {:.2} ms:", span * 1e3);
            for (inner, time) in device.inner().iter().zip(device.gate_profile().times()) {
                let total = time.total.as_secs_f64();
                eprintln!(
                    "  {}: {} gates, {:.2} ms ({:.1}% of the span, mean {:.1} us per gate)",
                    inner.info().name,
                    time.gates,
                    total * 1e3,
                    100.0 * total / span.max(1e-9),
                    total * 1e6 / time.gates.max(1) as f64
                );
            }
        }
        let Some(path) = &self.trace else { return Ok(()) };
        std::fs::write(path, trace.to_json()).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("trace written to {} (open in https://ui.perfetto.dev or chrome://tracing)", path.display());
        for (track, share) in trace.busy_shares() {
            eprintln!("  {track}: busy {:.0}% of the traced span", share * 100.0);
        }
        Ok(())
    }
}
