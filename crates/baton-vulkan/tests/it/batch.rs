//! Several sequences in one model on `vulkan:0` (`Model::eval_batch`):
//! each sequence's logits in batched steps against the same sequence
//! evaluated alone on the same device.
//!
//! With float weights they are equal bit for bit. With quantized weights
//! they are not yet: a step of fewer than four rows runs `matmul.wgsl`,
//! more run `matmul_rows.wgsl`, and the two sum a row's blocks in different
//! orders, so a sequence's rows can round differently in a batch (bounded
//! here as the mixed-device tests bound it: NMSE 1e-3, greedy tokens equal).
//! The CPU backend is batch invariant for every type.

use baton_core::DType;
use baton_model::{LoadOptions, Logits, Model, SeqStep};
use baton_testkit::argmax;
use baton_testkit::synth::tiny_model;

use crate::vulkan;

const DECODE: usize = 4;

fn bits(logits: &[f32]) -> Vec<u32> {
    logits.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn batched_sequences_match_each_alone_on_vulkan() {
    let Some(device) = vulkan() else { return };
    let prompts: [&[u32]; 3] = [&[5, 9, 200, 31, 7], &[300], &[11, 12, 13, 14, 15, 16, 17, 18, 19]];
    for dtype in [DType::F32, DType::Q4_1] {
        let (_dir, path) = tiny_model("vk-batch", dtype, 41);
        let options = |slots| LoadOptions { context: Some(64), batch: 32, slots, ..LoadOptions::default() };
        let mut alone = Model::load(&path, device.clone(), &options(1)).expect("one slot");
        let mut want = Vec::new();
        for prompt in prompts {
            let mut seq = vec![bits(alone.eval_prompt(prompt, 0).expect("prompt"))];
            for past in prompt.len()..prompt.len() + DECODE {
                let next = argmax(&seq.last().expect("logits").iter().map(|&b| f32::from_bits(b)).collect::<Vec<_>>());
                seq.push(bits(alone.eval(&[next], past, Logits::Last).expect("decode")));
            }
            want.push(seq);
        }
        let mut many = Model::load(&path, device.clone(), &options(prompts.len())).expect("slots");
        let vocab = many.config().vocab;
        // Every prompt in one step, then decode steps of all three.
        let steps: Vec<SeqStep> =
            prompts.iter().enumerate().map(|(s, p)| SeqStep { slot: s, past: 0, tokens: p }).collect();
        let mut got: Vec<Vec<Vec<u32>>> = vec![Vec::new(); prompts.len()];
        let first = many.eval_batch(&steps).expect("prompts").to_vec();
        for (s, row) in first.chunks(vocab).enumerate() {
            got[s].push(bits(row));
        }
        for k in 0..DECODE {
            let next: Vec<u32> = got
                .iter()
                .map(|seq| argmax(&seq.last().expect("logits").iter().map(|&b| f32::from_bits(b)).collect::<Vec<_>>()))
                .collect();
            let steps: Vec<SeqStep> = (0..prompts.len())
                .map(|s| SeqStep { slot: s, past: prompts[s].len() + k, tokens: std::slice::from_ref(&next[s]) })
                .collect();
            let rows = many.eval_batch(&steps).expect("decode").to_vec();
            for (s, row) in rows.chunks(vocab).enumerate() {
                got[s].push(bits(row));
            }
        }
        for (s, (g, w)) in got.iter().zip(&want).enumerate() {
            for (k, (g, w)) in g.iter().zip(w).enumerate() {
                if dtype == DType::F32 {
                    assert!(g == w, "{dtype}: sequence {s}, logits {k} differ from alone");
                    continue;
                }
                let (g, w): (Vec<f32>, Vec<f32>) =
                    (g.iter().map(|&b| f32::from_bits(b)).collect(), w.iter().map(|&b| f32::from_bits(b)).collect());
                let err: f64 = g.iter().zip(&w).map(|(&a, &b)| (f64::from(a) - f64::from(b)).powi(2)).sum();
                let norm: f64 = w.iter().map(|&b| f64::from(b).powi(2)).sum();
                assert!(err / norm <= 1e-3, "{dtype}: sequence {s}, logits {k}: NMSE {}", err / norm);
                assert_eq!(argmax(&g), argmax(&w), "{dtype}: sequence {s}, logits {k}: another greedy token");
            }
        }
    }
}
