//! Baton's logits for a list of token ids, for comparing with another
//! engine on the same file (`scripts/compare-logits.py`): every position's
//! logits as little-endian f32 rows to a file, then greedy continuation
//! ids on stdout.
//!
//! Usage: `logits MODEL.gguf IDS OUT.f32 [GREEDY]` where IDS is
//! comma-separated token ids and GREEDY the tokens to continue with
//! (default 0). The model runs on the CPU with an f32 KV cache.

use std::io::Write;

use baton_core::DType;
use baton_model::{LoadOptions, Logits, Model};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, model, ids, out, rest @ ..] = &args[..] else {
        return Err("usage: logits MODEL.gguf IDS OUT.f32 [GREEDY]".into());
    };
    let tokens: Vec<u32> = ids.split(',').map(str::parse).collect::<Result<_, _>>()?;
    let greedy: usize = rest.first().map_or(Ok(0), |n| n.parse())?;
    let device = baton_cpu::open(&["cpu"])?.remove(0);
    let context = Some(tokens.len() + greedy + 1);
    let options = LoadOptions { context, cache_type: DType::F32, batch: 512, ..LoadOptions::default() };
    let mut model = Model::load(model, device, &options)?;
    let mut file = std::io::BufWriter::new(std::fs::File::create(out)?);
    let mut past = 0;
    let mut last = Vec::new();
    let vocab = model.config().vocab;
    for chunk in tokens.chunks(512) {
        let logits = model.eval(chunk, past, Logits::All)?;
        for v in logits {
            file.write_all(&v.to_le_bytes())?;
        }
        last = logits[logits.len() - vocab..].to_vec();
        past += chunk.len();
    }
    file.flush()?;
    let mut picks = Vec::with_capacity(greedy);
    for _ in 0..greedy {
        let next = argmax(&last);
        picks.push(next.to_string());
        last = model.eval(&[next], past, Logits::Last)?.to_vec();
        past += 1;
    }
    println!("{}", picks.join(","));
    Ok(())
}

/// The index of the largest value (the first of equals).
fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}
