//! The fact speculative decoding stands on: a step that evaluates a
//! sequence's next k + 1 positions at once gives each position the logits,
//! bit for bit, that evaluating them one at a time gives. Checked for one
//! sequence alone (`Logits::All`, `baton run`'s verification) and for a
//! sequence's rows beside other sequences in a server step
//! (`submit_batch_rows`), on synthetic models of every shape that matters
//! (dense, rings, experts, quantized caches) and, behind `reference-tests`,
//! on SmolLM2.

use std::path::Path;

use baton_core::DType;
use baton_model::{LoadOptions, Logits, Model, SeqStep};
use baton_synth::SynthShape;
use baton_testkit::synth::synth_model;

fn load(path: &Path, slots: usize, cache: DType) -> Model {
    let device =
        baton_cpu::open_with(&["cpu"], &baton_cpu::OpenOptions::default().with_threads(2)).expect("cpu").remove(0);
    let options = LoadOptions { context: Some(256), cache_type: cache, batch: 16, slots, ..LoadOptions::default() };
    Model::load(path, device, &options).expect("load")
}

fn bits(row: &[f32]) -> Vec<u32> {
    row.iter().map(|x| x.to_bits()).collect()
}

/// A prompt and the tokens that follow it (any tokens: verification takes
/// whatever was drafted), for a vocabulary of `vocab`.
fn tokens(seed: u32, n: usize, vocab: usize) -> Vec<u32> {
    (0..n as u32).map(|i| (i * 31 + seed * 97 + 5) % vocab as u32).collect()
}

/// Each position's logits evaluated one at a time after `prompt`.
fn one_at_a_time(model: &mut Model, prompt: &[u32], next: &[u32]) -> Vec<Vec<u32>> {
    model.eval_prompt(prompt, 0).expect("prompt");
    next.iter()
        .enumerate()
        .map(|(i, &t)| bits(model.eval(&[t], prompt.len() + i, Logits::Last).expect("one token")))
        .collect()
}

/// The same positions in steps of `k + 1` tokens (every row's logits),
/// each step starting where the previous one's first `keep` rows end: the
/// rows after them are evaluated again in the next step, as rejected
/// drafts are.
fn in_steps(model: &mut Model, prompt: &[u32], next: &[u32], k: usize, keep: usize) -> Vec<Vec<u32>> {
    model.eval_prompt(prompt, 0).expect("prompt");
    let vocab = model.config().vocab;
    let mut got: Vec<Vec<u32>> = Vec::new();
    let mut at = 0;
    while at < next.len() {
        let step = &next[at..(at + k + 1).min(next.len())];
        let rows = model.eval(step, prompt.len() + at, Logits::All).expect("a step of several tokens");
        let kept = keep.min(step.len());
        got.extend(rows.chunks(vocab).take(kept).map(bits));
        at += kept;
    }
    got
}

fn check_model(path: &Path, what: &str, cache: DType, vocab_tokens: usize) {
    let mut model = load(path, 1, cache);
    let vocab = model.config().vocab.min(vocab_tokens);
    for seed in 0..3 {
        let prompt = tokens(seed, 5 + seed as usize * 7, vocab);
        let next = tokens(seed + 11, 13, vocab);
        let want = one_at_a_time(&mut model, &prompt, &next);
        for (k, keep) in [(1, 2), (3, 4), (4, 2), (7, 1), (7, 8)] {
            let got = in_steps(&mut model, &prompt, &next, k, keep);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(g == w, "{what}, {cache} cache, seed {seed}, k {k}, keep {keep}: position {i} differs");
            }
            assert_eq!(got.len(), want.len());
        }
    }
}

#[test]
fn several_positions_in_one_step_give_the_bits_of_one_at_a_time() {
    for (shape, dtype, cache) in [
        (SynthShape::Tiny, DType::F32, DType::F32),
        (SynthShape::Tiny, DType::Q4_1, DType::F16),
        (SynthShape::Tiny, DType::Q8_0, DType::F16),
        (SynthShape::Qwen3, DType::Q8_0, DType::Q8_0),
        (SynthShape::Gemma3, DType::Q8_0, DType::F16),
        (SynthShape::Qwen3Moe, DType::Q8_0, DType::F16),
        (SynthShape::GptOss, DType::Q8_0, DType::F16),
    ] {
        let (_dir, path) = synth_model("verify-bits", shape, dtype, 19);
        check_model(&path, &format!("{shape} {dtype}"), cache, usize::MAX);
    }
}

/// A sequence's k + 1 rows among other sequences' in one server step
/// (`submit_batch_rows`, every row of the flagged sequence giving logits)
/// give the bits of that sequence alone, one token at a time.
#[test]
fn a_sequences_rows_beside_others_give_the_bits_of_one_at_a_time() {
    for shape in [SynthShape::Tiny, SynthShape::Gemma3, SynthShape::Qwen3Moe] {
        let (_dir, path) = synth_model("verify-rows", shape, DType::Q8_0, 7);
        let mut alone = load(&path, 1, DType::F16);
        let vocab = alone.config().vocab;
        let prompts: Vec<Vec<u32>> = (0..3).map(|s| tokens(s, 4 + s as usize * 5, vocab)).collect();
        let nexts: Vec<Vec<u32>> = (0..3).map(|s| tokens(s + 20, 4, vocab)).collect();
        let want: Vec<Vec<Vec<u32>>> =
            prompts.iter().zip(&nexts).map(|(p, n)| one_at_a_time(&mut alone, p, n)).collect();
        let mut many = load(&path, 3, DType::F16);
        for (slot, p) in prompts.iter().enumerate() {
            many.eval_batch(&[SeqStep { slot, past: 0, tokens: p }]).expect("prompt");
        }
        // Sequence 0 verifies its four tokens, 1 decodes one, 2 verifies two.
        let takes = [4usize, 1, 2];
        let steps: Vec<SeqStep<'_>> =
            (0..3).map(|s| SeqStep { slot: s, past: prompts[s].len(), tokens: &nexts[s][..takes[s]] }).collect();
        let every = [true, false, true];
        let ticket = many.submit_batch_rows(&steps, &[false; 3], &every).expect("submit");
        let rows = many.batch_logits(ticket).expect("logits").to_vec();
        let mut row = 0;
        for s in 0..3 {
            let firsts: Vec<usize> = if every[s] { (0..takes[s]).collect() } else { vec![takes[s] - 1] };
            for i in firsts {
                let got = bits(&rows[row * vocab..(row + 1) * vocab]);
                assert!(got == want[s][i], "{shape}: sequence {s}, position {i} differs from alone");
                row += 1;
            }
        }
    }
}

/// SmolLM2-135M (Q4_1), the model the goals are set on.
#[cfg(feature = "reference-tests")]
#[test]
fn several_positions_in_one_step_give_the_bits_of_one_at_a_time_on_smollm2() {
    let path = baton_testkit::env::smollm2();
    for cache in [DType::F16, DType::Q8_0] {
        check_model(&path, "SmolLM2", cache, 49152);
    }
}
