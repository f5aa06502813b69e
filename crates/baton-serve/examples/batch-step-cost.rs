//! What a batched decode step costs: `n` sequences of one token each
//! against one sequence of `n` tokens (the same weight reads; the
//! difference is per-sequence attention), median of 15 steps each:
//! `cargo run --release -p baton-serve --example batch-step-cost -- MODEL.gguf`.

use std::time::Instant;

use baton_model::{LoadOptions, Logits, Model, SeqStep};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: batch-step-cost MODEL.gguf")?;
    let device = baton_cpu::open(&["cpu"])?.remove(0);
    let slots = 16;
    let mut model = Model::load(&path, device, &LoadOptions { context: Some(512), slots, ..LoadOptions::default() })?;
    let toks: Vec<u32> = (0..slots as u32).map(|i| 100 + i).collect();
    for s in 0..slots {
        model.eval_batch(&[SeqStep { slot: s, past: 0, tokens: &toks[..4] }])?;
    }
    // A new batch shape builds its graph and plan: timed against a step
    // whose plan is cached.
    for n in [1usize, 8] {
        let steps: Vec<SeqStep> = (0..n).map(|s| SeqStep { slot: s, past: 4, tokens: &toks[s..s + 1] }).collect();
        let t = Instant::now();
        model.eval_batch(&steps)?;
        let first = t.elapsed().as_secs_f64();
        let t = Instant::now();
        model.eval_batch(&steps)?;
        let again = t.elapsed().as_secs_f64();
        println!("{n} sequences: first step of the shape {:.1} ms, again {:.1} ms", first * 1e3, again * 1e3);
    }
    println!("rows  {:>14}  {:>14}  ratio", "n sequences", "one sequence");
    for n in [1usize, 2, 4, 8, 16] {
        let (mut batched, mut one) = (Vec::new(), Vec::new());
        for r in 0..15 {
            let steps: Vec<SeqStep> =
                (0..n).map(|s| SeqStep { slot: s, past: 4 + r, tokens: &toks[s..s + 1] }).collect();
            let t = Instant::now();
            model.eval_batch(&steps)?;
            batched.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            model.eval(&toks[..n], 30 + r * 16, Logits::Last)?;
            one.push(t.elapsed().as_secs_f64());
        }
        let (b, o) = (median(batched), median(one));
        println!("{n:>4}  {:>11.1} ms  {:>11.1} ms  {:.2}", b * 1e3, o * 1e3, b / o);
    }
    Ok(())
}
