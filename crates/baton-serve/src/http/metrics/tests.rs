use super::*;
use crate::engine::{EngineStats, HistogramSnapshot, LATENCY_BUCKETS};

fn sample() -> EngineMetrics {
    let mut cumulative: Vec<u64> = (0..=LATENCY_BUCKETS.len() as u64).collect();
    cumulative[0] = 0;
    EngineMetrics {
        stats: EngineStats {
            running: 2,
            queued: 1,
            steps: 10,
            generated_tokens: 40,
            prompt_tokens: 7,
            host_waits: 10,
            cancelled: 3,
            panics: 0,
        },
        ended_stop: 4,
        ended_length: 5,
        ended_failed: 6,
        prompt_tokens_cached: 21,
        slots: 4,
        kv_positions_used: 90,
        kv_positions_total: 4096,
        kv_blocks: [128, 20, 6, 31, 5, 1024],
        time_to_first_token: HistogramSnapshot { cumulative: cumulative.clone(), sum_seconds: 1.5 },
        inter_token_latency: HistogramSnapshot { cumulative, sum_seconds: 0.25 },
        tokens_per_second: 12.5,
        cache_ram_prompts: 2,
        cache_ram_bytes: 4096,
        drafted_tokens: 40,
        accepted_tokens: 25,
        kv_preemptions: 3,
        draft_verifications: 9,
        prompt_seconds: 0.5,
        decode_seconds: 2.0,
        step_sequences: 25,
        longest_sequence: 300,
    }
}

/// Every line is a comment or `name{labels} value`, every sample's family
/// was declared with a type first, and the values are those given.
#[test]
fn the_exposition_is_well_formed_and_says_the_values() {
    let text = render(&sample(), "a \"quoted\" model");
    let mut declared = std::collections::HashSet::new();
    let mut values = std::collections::HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("a type");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(declared.insert(name.to_string()), "{name} declared twice");
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a value");
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("a number in {line}"));
        let name = series.split('{').next().expect("a name");
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| declared.contains(*f)))
            .unwrap_or(name);
        assert!(declared.contains(family), "{name} has no TYPE line before it");
        // Prometheus' name characters (`:` in llama-server's names).
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'), "{name}");
        values.insert(series.to_string(), value);
    }
    assert_eq!(values["baton_requests_running"], 2.0);
    assert_eq!(values["baton_requests_queued"], 1.0);
    assert_eq!(values["baton_requests_ended_total{reason=\"cancelled\"}"], 3.0);
    assert_eq!(values["baton_requests_ended_total{reason=\"failed\"}"], 6.0);
    assert_eq!(values["baton_generated_tokens_total"], 40.0);
    assert_eq!(values["baton_prefix_cache_hit_ratio"], 0.75, "21 cached of 28 read");
    assert_eq!(values["baton_generated_tokens_per_second"], 12.5);
    assert_eq!(values["baton_prompt_cache_ram_bytes"], 4096.0);
    assert_eq!((values["baton_drafted_tokens_total"], values["baton_draft_accepted_tokens_total"]), (40.0, 25.0));
    assert_eq!(values["baton_kv_preemptions_total"], 3.0);
    assert_eq!(values["baton_prompt_cache_ram_prompts"], 2.0);
    assert_eq!(values["baton_kv_slots_free"], 2.0);
    let blocks = ["total", "used", "free", "shared", "held"].map(|k| values[&format!("baton_kv_blocks_{k}")]);
    assert_eq!(blocks, [128.0, 20.0, 108.0, 6.0, 31.0]);
    assert_eq!((values["baton_kv_bytes_used"], values["baton_kv_sequences_holding"]), (20.0 * 1024.0, 5.0));
    assert_eq!(values["baton_host_waits_per_step"], 1.0);
    assert_eq!(values["baton_time_to_first_token_seconds_bucket{le=\"+Inf\"}"], LATENCY_BUCKETS.len() as f64);
    assert_eq!(values["baton_time_to_first_token_seconds_count"], LATENCY_BUCKETS.len() as f64);
    assert_eq!(values["baton_inter_token_latency_seconds_sum"], 0.25);
    assert_eq!(values["baton_model_info{model=\"a \\\"quoted\\\" model\"}"], 1.0);
    // llama-server's names for the same figures.
    let llama = |name: &str| values[&format!("llamacpp:{name}")];
    assert_eq!((llama("prompt_tokens_total"), llama("prompt_tokens_cached_total")), (7.0, 21.0));
    assert_eq!((llama("tokens_predicted_total"), llama("n_decode_total")), (40.0, 10.0));
    assert_eq!((llama("prompt_seconds_total"), llama("tokens_predicted_seconds_total")), (0.5, 2.0));
    assert_eq!((llama("prompt_tokens_seconds"), llama("predicted_tokens_seconds")), (14.0, 20.0));
    assert_eq!((llama("requests_processing"), llama("requests_deferred")), (2.0, 1.0));
    assert_eq!((llama("n_busy_slots_per_decode"), llama("n_tokens_max")), (2.5, 300.0));
    let drafts = ["draft_tokens", "accepted_tokens", "drafts"].map(|k| llama(&format!("spec_decode_num_{k}_total")));
    assert_eq!(drafts, [40.0, 25.0, 9.0]);
    for (name, kind) in [("n_decode_total", "counter"), ("requests_processing", "gauge")] {
        assert!(text.contains(&format!("# TYPE llamacpp:{name} {kind}\n")), "{name} is a {kind}");
    }
}
