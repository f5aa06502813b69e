//! Quantized KV caches on the real models: perplexity of SmolLM2 and
//! Gemma 3 on a Debian license text with `-ctk q8_0 -ctv q8_0` within 0.5%
//! of an f16 cache (the bound), over `BATON_PPL_CHUNKS` chunks of
//! 512 (4 by default; `scripts/perplexity-check.sh`'s whole-text figures
//! are in the README). Behind `reference-tests`: it needs the models.
#![cfg(feature = "reference-tests")]

use std::path::Path;

use baton_core::DType;
use baton_gen::{perplexity, PerplexityOptions};
use baton_model::{LoadOptions, Model};
use baton_testkit::env::{gemma3, smollm2};

fn ppl(path: &Path, (k, v): (DType, DType), text: &str, chunks: usize) -> f64 {
    let context = 512;
    let options = LoadOptions {
        context: Some(context),
        batch: context,
        cache_type: k,
        cache_type_v: Some(v),
        ..Default::default()
    };
    let device = baton_cpu::open(&["cpu"]).expect("cpu").remove(0);
    let mut model = Model::load(path, device, &options).expect("load");
    perplexity(&mut model, text, &PerplexityOptions { context, chunks: Some(chunks) }, &mut |_, _| {})
        .expect("perplexity")
        .ppl
}

fn q8_0_within_half_a_percent(label: &str, path: &Path) {
    let text_path = std::env::var("BATON_PPL_TEXT").unwrap_or_else(|_| "/usr/share/common-licenses/GPL-3".into());
    let text = std::fs::read_to_string(&text_path).expect("the license text (Debian base-files)");
    let chunks: usize = std::env::var("BATON_PPL_CHUNKS").ok().and_then(|c| c.parse().ok()).unwrap_or(4);
    let f16 = ppl(path, (DType::F16, DType::F16), &text, chunks);
    let q8 = ppl(path, (DType::Q8_0, DType::Q8_0), &text, chunks);
    let rel = (q8 - f16) / f16;
    println!(
        "{label}: perplexity over {chunks} chunks of 512: f16 cache {f16:.4}, q8_0 cache {q8:.4} ({:+.3}%)",
        rel * 100.0
    );
    assert!(rel.abs() <= 0.005, "{label}: a q8_0 cache moves perplexity by {:+.3}%", rel * 100.0);
}

#[test]
fn smollm2_perplexity_with_a_q8_0_cache_is_within_half_a_percent_of_f16() {
    q8_0_within_half_a_percent("SmolLM2 Q4_1", &smollm2());
}

#[test]
fn gemma3_perplexity_with_a_q8_0_cache_is_within_half_a_percent_of_f16() {
    q8_0_within_half_a_percent("Gemma 3 270M Q4_K_M", &gemma3());
}
