//! Do two steps in flight over a layer split overlap? Times two batched
//! steps of disjoint sequences submitted together against one after the
//! other: `overlap-check MODEL.gguf`.
use std::time::Instant;

use baton_model::{LoadOptions, Model, SeqStep};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: overlap-check MODEL.gguf")?;
    let devices = baton_cpu::open(&["cpu:0", "cpu:1"])?;
    let options = LoadOptions { context: Some(256), slots: 8, n_copies: 2, ..LoadOptions::default() };
    let mut model = Model::load_split(&path, devices, &options)?;
    let toks: Vec<u32> = (0..8).map(|i| 100 + i).collect();
    for s in 0..8 {
        model.eval_batch(&[SeqStep { slot: s, past: 0, tokens: &toks[..4] }])?;
    }
    let group = |g: usize, past: usize| -> Vec<SeqStep<'_>> {
        (0..4).map(|i| SeqStep { slot: g * 4 + i, past, tokens: &toks[i..i + 1] }).collect()
    };
    for round in 0..3 {
        let past = 4 + round * 2;
        let t = Instant::now();
        model.eval_batch(&group(0, past))?;
        model.eval_batch(&group(1, past))?;
        let serial = t.elapsed();
        let t = Instant::now();
        let a = model.submit_batch(&group(0, past + 1))?;
        let b = model.submit_batch(&group(1, past + 1))?;
        model.batch_logits(a)?;
        model.batch_logits(b)?;
        let both = t.elapsed();
        println!("one after the other {serial:?}, both in flight {both:?}");
    }
    Ok(())
}
