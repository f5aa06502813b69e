//! `baton plan` under `--split-mode expert`: each device's share of the
//! experts and its bytes, and the activations that cross per token.

use std::fmt::Write;

use baton_model::{ExpertSplit, Model};

/// Each device's experts (a range of every MoE layer's) and their bytes,
/// then the bytes of activations sent between devices per token: per MoE
/// layer and over every one.
pub fn describe(model: &Model, split: ExpertSplit, names: &[String]) -> String {
    let mut out = String::new();
    let config = model.config();
    let Some(experts) = config.experts else { return out };
    let mib = |b: usize| b as f64 / f64::from(1 << 20);
    let how = match split.exact {
        true => "exact: every pick's output gathered to the first device",
        false => "each device sums its own experts' weighted outputs",
    };
    let _ = writeln!(out, "experts split over {} devices ({how}):", split.devices);
    let bytes = model.expert_bytes_by_device();
    for ((name, range), held) in names.iter().zip(split.shares(experts.count)).zip(&bytes) {
        let _ = writeln!(
            out,
            "  {name}: experts {}..{} of {} in each of {} layers, {:.1} MiB",
            range.start,
            range.end,
            experts.count,
            config.layers,
            mib(*held)
        );
    }
    let per_layer = split.traffic_bytes_per_token(config.dim, experts);
    let _ = writeln!(
        out,
        "activations between devices per token: {per_layer} bytes a layer, {:.1} KiB over {} layers",
        (per_layer * config.layers) as f64 / 1024.0,
        config.layers
    );
    out
}

#[cfg(test)]
mod tests {
    use baton_core::DType;
    use baton_model::{LoadOptions, Model};
    use baton_synth::{write_synth_model, SynthShape, SynthSpec};
    use baton_testkit::TempDir;

    use super::*;

    #[test]
    fn the_plan_of_an_expert_split_names_each_devices_share_and_the_traffic() {
        let dir = TempDir::new("plan-experts");
        let path = dir.file("qwen3moe.gguf");
        write_synth_model(&SynthSpec { shape: SynthShape::Qwen3Moe, dtype: DType::Q8_0, seed: 5 }, &path)
            .expect("synth");
        let devices = baton_cpu::open(&["cpu:0", "cpu:1"]).expect("devices");
        let options = LoadOptions { context: Some(32), batch: 8, expert_split: true, ..LoadOptions::default() };
        let model = Model::load_split(&path, devices, &options).expect("experts split");
        let split = model.expert_split().expect("split");
        let names = vec!["cpu:0".to_string(), "cpu:1".to_string()];
        let text = describe(&model, split, &names);
        let c = model.config();
        let e = c.experts.expect("experts");
        assert!(text.contains(&format!("cpu:0: experts 0..{} of {}", e.count / 2, e.count)), "{text}");
        assert!(text.contains(&format!("cpu:1: experts {}..{}", e.count / 2, e.count)), "{text}");
        let per_layer = (c.dim + 2 * e.used + c.dim) * 4;
        assert!(text.contains(&format!("{per_layer} bytes a layer")), "{text}");
    }
}
