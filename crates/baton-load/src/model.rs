//! A model loaded over opened devices as a split mode says, packed and
//! warmed up so the first request does not pay for either.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use baton_composite::CompositeDevice;
use baton_core::backend::Device;
use baton_core::sync::WaitPolicy;
use baton_model::{LoadOptions, Model};

use crate::LoadError;

/// How a model is spread over several devices (`--split-mode`, `-sm`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SplitMode {
    /// The first device only.
    None,
    /// Contiguous layers per device.
    #[default]
    Layer,
    /// Every weight split over the devices, all-reduce gates.
    Tensor,
    /// Every layer on the first device, each device holding a share of
    /// every mixture-of-experts layer's experts (expert parallelism; see
    /// [`ExpertSplit`](baton_model::ExpertSplit)).
    Expert,
}

impl SplitMode {
    /// Every mode, in the order `--help` lists them.
    pub const ALL: [SplitMode; 4] = [SplitMode::None, SplitMode::Layer, SplitMode::Tensor, SplitMode::Expert];

    /// The mode's name (`-sm NAME`, llama.cpp's).
    pub fn name(self) -> &'static str {
        match self {
            SplitMode::None => "none",
            SplitMode::Layer => "layer",
            SplitMode::Tensor => "tensor",
            SplitMode::Expert => "expert",
        }
    }
}

impl std::fmt::Display for SplitMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SplitMode {
    type Err = LoadError;

    fn from_str(name: &str) -> Result<SplitMode, LoadError> {
        SplitMode::ALL.into_iter().find(|mode| mode.name() == name).ok_or_else(|| LoadError::UnknownSplit(name.into()))
    }
}

/// Loads the model at `path` over `devices` as `split` says (a tensor
/// split's gates wait with `policy`), then runs one warm-up step: packing
/// the weights for the CPU kernels and building the decode plan are part
/// of loading, not of the first request.
pub fn load_model(
    path: &Path,
    devices: Vec<Arc<dyn Device>>,
    split: SplitMode,
    policy: WaitPolicy,
    options: &LoadOptions,
) -> Result<Model, LoadError> {
    let devices: Vec<Arc<dyn Device>> = match split {
        SplitMode::Layer | SplitMode::Tensor | SplitMode::Expert => devices,
        SplitMode::None => devices.into_iter().take(1).collect(),
    };
    let shares = &options.tensor_split;
    if !shares.is_empty() && shares.len() != devices.len() {
        return Err(LoadError::TensorSplit(format!(
            "--tensor-split has {} shares for {} devices",
            shares.len(),
            devices.len()
        )));
    }
    if shares.iter().any(|w| !w.is_finite() || *w < 0.0) || (!shares.is_empty() && shares.iter().all(|w| *w == 0.0)) {
        return Err(LoadError::TensorSplit(format!(
            "--tensor-split {shares:?}: shares are numbers of at least 0, not all 0"
        )));
    }
    let loaded = match split {
        SplitMode::Tensor => {
            let composite = CompositeDevice::new(devices, policy)?;
            Model::load_tensor_parallel(path, Arc::new(composite), options)
        }
        SplitMode::Expert => Model::load_split(path, devices, &LoadOptions { expert_split: true, ..options.clone() }),
        SplitMode::None | SplitMode::Layer => Model::load_split(path, devices, options),
    };
    let mut model =
        loaded.map_err(|source| LoadError::Model { path: path.display().to_string(), source: Box::new(source) })?;
    // The heap the parse freed (the file's vocabulary arrays) goes back to
    // the system first, so the packed weights do not come on top of it.
    return_freed_heap();
    model.warm_up().map_err(|e| LoadError::WarmUp(Box::new(e)))?;
    Ok(model)
}

/// Gives the heap pages that `free` kept back to the system (glibc keeps
/// freed memory below the top of the heap resident).
pub fn return_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own
    // arenas; it is thread-safe and touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_modes_parse_by_name_and_others_are_refused() {
        assert_eq!("tensor".parse::<SplitMode>().ok(), Some(SplitMode::Tensor));
        assert_eq!("none".parse::<SplitMode>().ok(), Some(SplitMode::None));
        assert_eq!("expert".parse::<SplitMode>().ok(), Some(SplitMode::Expert));
        let bad = "rows".parse::<SplitMode>().expect_err("not a mode").to_string();
        assert!(bad.contains("unknown split mode \"rows\""), "{bad}");
    }
}
