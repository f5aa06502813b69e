//! The gated delta rule over a prompt for one head (Qwen 3.5's heads: keys
//! and values of 128), token by token (`delta_rule_step`) against the
//! chunked form (`delta_rule_chunk`) at several chunk lengths, alternating,
//! in CPU time of this thread: tokens per second and the ratio.
//!
//! Run with `cargo bench -p baton-kernels --bench delta_rule`.

use std::hint::black_box;
use std::time::Instant;

use baton_kernels::delta_chunk::{delta_rule_chunk, ChunkScratch};
use baton_kernels::recurrent::delta_rule_step;

const TOKENS: usize = 512;
const DK: usize = 128;
const DV: usize = 128;

fn main() {
    let r = |i: usize, s: f32| ((i as f32 * 0.37 + s).sin()) * 0.5;
    let unit = |s: f32| -> Vec<f32> {
        (0..TOKENS)
            .flat_map(|t| {
                let row: Vec<f32> = (0..DK).map(|i| r(t * DK + i, s)).collect();
                let n = row.iter().map(|x| x * x).sum::<f32>().sqrt();
                row.into_iter().map(move |x| x / n)
            })
            .collect()
    };
    let (q, k) = (unit(1.0), unit(2.0));
    let v: Vec<f32> = (0..TOKENS * DV).map(|i| r(i, 3.0)).collect();
    let g: Vec<f32> = (0..TOKENS).map(|t| -0.05 - 0.3 * r(t, 4.0).abs()).collect();
    let beta: Vec<f32> = (0..TOKENS).map(|t| 0.2 + r(t, 5.0).abs()).collect();
    let mut state = vec![0.0f32; DV * DK];
    let mut out = vec![0.0f32; TOKENS * DV];
    let mut steps = || {
        state.fill(0.0);
        for t in 0..TOKENS {
            let o = &mut out[t * DV..][..DV];
            let qk = (&q[t * DK..][..DK], &k[t * DK..][..DK], &v[t * DV..][..DV]);
            delta_rule_step(&mut state, qk, g[t].exp(), beta[t], 0.1, o);
        }
        black_box(&mut out);
    };
    let mut chunked_state = vec![0.0f32; DV * DK];
    let mut chunked_out = vec![0.0f32; TOKENS * DV];
    let mut scratch = ChunkScratch::default();
    let mut chunked = |c: usize| {
        chunked_state.fill(0.0);
        for t0 in (0..TOKENS).step_by(c) {
            let t1 = (t0 + c).min(TOKENS);
            let qkv = (&q[t0 * DK..t1 * DK], &k[t0 * DK..t1 * DK], &v[t0 * DV..t1 * DV]);
            let o = &mut chunked_out[t0 * DV..t1 * DV];
            delta_rule_chunk(&mut chunked_state, qkv, (&g[t0..t1], &beta[t0..t1]), 0.1, o, &mut scratch);
        }
        black_box(&mut chunked_out);
    };
    let best = |f: &mut dyn FnMut()| {
        (0..20)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    };
    println!("{TOKENS} tokens, one head, Dk {DK}, Dv {DV}: tokens/s (best of 20), 3 alternating rounds");
    for _round in 0..3 {
        let base = best(&mut steps);
        print!("steps {:>9.0}", TOKENS as f64 / base);
        for c in [16, 32, 64, 128] {
            let t = best(&mut || chunked(c));
            print!(" | C {c}: {:>9.0} ({:.2}x)", TOKENS as f64 / t, base / t);
        }
        println!();
    }
}
