//! Where a mixture of experts' experts go when not with their layers
//! (llama.cpp's flags): `--cpu-moe` (every layer's on the CPU),
//! `--n-cpu-moe N` (the first N layers'), `-ot PATTERN=DEVICE` (the layers
//! whose expert tensors' names the regular expression matches). The
//! router goes with its experts. A CPU named by none of `--devices` is
//! added to the list, holding no layer.

use std::path::Path;

use anyhow::{bail, Context, Result};
use baton_model::baton_gguf::GgufFile;
use baton_model::LlamaConfig;

use super::args::ModelArgs;

/// The device list, tensor split and per-layer experts' devices the
/// flags give.
#[derive(Debug, PartialEq)]
pub(super) struct ExpertPlacement {
    /// `--devices`, with a CPU added where the experts need one.
    pub devices: String,
    /// `--tensor-split`, with no share for an added CPU.
    pub tensor_split: Vec<f32>,
    /// Per layer, the device index of its experts (`None`: its layer's).
    pub expert_devices: Vec<Option<usize>>,
}

/// The tensor names of layer `l`'s experts, as llama.cpp names them.
fn expert_tensors(l: usize) -> [String; 3] {
    ["gate", "up", "down"].map(|w| format!("blk.{l}.ffn_{w}_exps.weight"))
}

/// Where the experts go under `args`' flags, for the model at `path`;
/// `None` without such flags.
pub(super) fn place(args: &ModelArgs, path: &Path) -> Result<Option<ExpertPlacement>> {
    if !args.cpu_moe && args.n_cpu_moe.is_none() && args.override_tensor.is_empty() {
        return Ok(None);
    }
    let handle = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let file = GgufFile::map(&handle, path)?;
    let config = LlamaConfig::from_gguf(&file)?;
    if config.experts.is_none() {
        bail!("--cpu-moe, --n-cpu-moe and -ot place experts, and {} has none", path.display());
    }
    let layers = config.layers;
    let mut devices: Vec<String> = args.devices.split(',').map(|d| d.trim().to_string()).collect();
    let named = devices.len();
    // The device a placement names: an entry of the list, or a CPU added.
    let mut index_of = |device: &str| -> Result<usize> {
        let plain = |s: &str| s.to_ascii_lowercase().replace(':', "");
        let wanted = plain(device);
        let found = devices.iter().position(|d| plain(d) == wanted || (wanted == "cpu" && plain(d).starts_with("cpu")));
        match found {
            Some(i) => Ok(i),
            None if wanted == "cpu" => {
                devices.push("cpu".into());
                Ok(devices.len() - 1)
            }
            None => bail!("-ot names device {device:?}, which --devices ({}) does not list", args.devices),
        }
    };
    let mut placed = vec![None; layers];
    if args.cpu_moe || args.n_cpu_moe.is_some() {
        let cpu = index_of("cpu")?;
        let first = if args.cpu_moe { layers } else { args.n_cpu_moe.unwrap_or(0).min(layers) };
        placed[..first].iter_mut().for_each(|p| *p = Some(cpu));
    }
    for rule in &args.override_tensor {
        let (pattern, device) = rule.rsplit_once('=').with_context(|| format!("-ot {rule:?}: not PATTERN=DEVICE"))?;
        let re = regex_lite::Regex::new(pattern).with_context(|| format!("-ot {rule:?}: the pattern"))?;
        let matched: Vec<usize> = (0..layers).filter(|&l| expert_tensors(l).iter().any(|t| re.is_match(t))).collect();
        if matched.is_empty() {
            let other = file.tensors().map(|t| t.name().to_string()).find(|name| re.is_match(name));
            match other {
                Some(name) => bail!("-ot {rule:?} matches {name}: only experts' tensors (ffn_*_exps) are placed apart"),
                None => bail!("-ot {rule:?} matches no tensor of the model"),
            }
        }
        let d = index_of(device)?;
        for l in matched {
            placed[l] = Some(d);
        }
    }
    let mut tensor_split = args.tensor_split.clone();
    if devices.len() > named {
        if tensor_split.is_empty() {
            tensor_split = vec![1.0; named];
        }
        tensor_split.push(0.0);
    }
    Ok(Some(ExpertPlacement { devices: devices.join(","), tensor_split, expert_devices: placed }))
}
