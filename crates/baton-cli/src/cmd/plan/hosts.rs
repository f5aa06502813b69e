//! `baton plan --hosts N`: a cost model of layer and tensor splits over
//! hosts joined by a link of a given latency and bandwidth.
//!
//! Inputs: the model's shape (the loaded file's, or a llama shape by name),
//! this host's measured compute (decode: seconds per weight byte read;
//! prompt: seconds per weight per token, so it scales with the FLOPs), and
//! the link. Each host is assumed as fast as this one.
//!
//! - **Layer split**, one sequence: the hosts run their layers in turn, so
//!   decode costs all the compute plus a hop of one activation row per host
//!   boundary and the logits shared from the last host. A prompt flows
//!   through in micro-batches: `(batches + hosts - 1)` stages of one host's
//!   share of a micro-batch plus its hop.
//! - **Tensor split** (partial sums): every host holds `1/N` of each
//!   weight, so compute divides by N; each layer adds two all-reduces of
//!   the activations (after attention and after the FFN), and the logits
//!   are gathered. An all-reduce is `ceil(log2 N)` exchanges (recursive
//!   doubling, as Baton's butterfly): latency plus bytes over bandwidth
//!   each; an all-gather sends `(N - 1)/N` of the data once.

use std::fmt::Write;

/// A llama-family shape: what the cost model needs.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Name to print.
    pub name: String,
    /// Embedding width.
    pub dim: usize,
    /// Layers.
    pub layers: usize,
    /// FFN width.
    pub ffn: usize,
    /// Query heads × head size over KV heads × head size (GQA factor).
    pub kv_dim: usize,
    /// Vocabulary.
    pub vocab: usize,
    /// Bytes of weights one decode step reads.
    pub decode_bytes: f64,
}

impl Shape {
    /// Weights of the shape (matrices; norms are negligible).
    pub fn params(&self) -> f64 {
        let per_layer = 2 * self.dim * self.dim + 2 * self.dim * self.kv_dim + 3 * self.dim * self.ffn;
        (self.layers * per_layer + self.dim * self.vocab) as f64
    }

    /// A llama shape at `bits` per weight: `llama-7b` (Llama 2 7B) or
    /// `llama-70b` (Llama 2 70B, GQA with 8 KV heads).
    pub fn named(name: &str, bits: f64) -> Option<Shape> {
        let (dim, layers, ffn, kv_dim, vocab) = match name {
            "llama-7b" => (4096, 32, 11008, 4096, 32000),
            "llama-70b" => (8192, 80, 28672, 1024, 32000),
            _ => return None,
        };
        let mut shape = Shape { name: name.into(), dim, layers, ffn, kv_dim, vocab, decode_bytes: 0.0 };
        shape.decode_bytes = shape.params() * bits / 8.0;
        Some(shape)
    }
}

/// The link between hosts.
#[derive(Clone, Copy, Debug)]
pub struct Link {
    /// Bandwidth in bytes per second.
    pub bytes_per_s: f64,
    /// One-way latency of a message in seconds.
    pub latency_s: f64,
}

impl Link {
    fn send(&self, bytes: f64) -> f64 {
        self.latency_s + bytes / self.bytes_per_s
    }

    fn all_reduce(&self, hosts: usize, bytes: f64) -> f64 {
        steps(hosts) * self.send(bytes)
    }

    fn all_gather(&self, hosts: usize, bytes: f64) -> f64 {
        if hosts < 2 {
            return 0.0;
        }
        steps(hosts) * self.latency_s + (hosts - 1) as f64 / hosts as f64 * bytes / self.bytes_per_s
    }
}

fn steps(hosts: usize) -> f64 {
    (hosts.max(1) as f64).log2().ceil()
}

/// This host's measured speed.
#[derive(Clone, Copy, Debug)]
pub struct Measured {
    /// Decode: seconds per byte of weights read.
    pub decode_s_per_byte: f64,
    /// Prompt: seconds per weight per token.
    pub prompt_s_per_param_token: f64,
}

/// One prediction: tokens per second and the share of the time on the link.
#[derive(Clone, Copy, Debug)]
pub struct Prediction {
    /// Decode tokens per second.
    pub tg: f64,
    /// Seconds per decode token on the link.
    pub tg_link_s: f64,
    /// Prompt tokens per second.
    pub pp: f64,
    /// Bytes each host sends per decode token.
    pub tg_bytes: f64,
}

/// A split's prediction for `shape` over `hosts`; `prompt` tokens read in
/// micro-batches of `ubatch`.
pub fn predict(
    shape: &Shape,
    hosts: usize,
    link: Link,
    m: Measured,
    tensor: bool,
    prompt: usize,
    ubatch: usize,
) -> Prediction {
    let n = hosts.max(1);
    let row = (shape.dim * 4) as f64;
    let logits = (shape.vocab * 4) as f64;
    let decode = m.decode_s_per_byte * shape.decode_bytes;
    let prompt_token = m.prompt_s_per_param_token * shape.params();
    if n == 1 {
        return Prediction { tg: 1.0 / decode, tg_link_s: 0.0, pp: 1.0 / prompt_token, tg_bytes: 0.0 };
    }
    if tensor {
        let gates = 2.0 * shape.layers as f64;
        let tg_link = gates * link.all_reduce(n, row) + link.all_gather(n, logits);
        let pp_link = gates * link.all_reduce(n, row * prompt as f64) + link.all_gather(n, logits);
        let pp_time = prompt_token * prompt as f64 / n as f64 + pp_link;
        let tg_bytes = gates * steps(n) * row + (n - 1) as f64 / n as f64 * logits;
        Prediction {
            tg: 1.0 / (decode / n as f64 + tg_link),
            tg_link_s: tg_link,
            pp: prompt as f64 / pp_time,
            tg_bytes,
        }
    } else {
        let share = link.all_gather(n, logits);
        let tg_link = (n - 1) as f64 * link.send(row) + share;
        let ub = ubatch.clamp(1, prompt.max(1));
        let batches = prompt.div_ceil(ub) as f64;
        let stage = prompt_token * ub as f64 / n as f64 + link.send(row * ub as f64);
        let pp_time = (batches + (n - 1) as f64) * stage + share;
        Prediction {
            tg: 1.0 / (decode + tg_link),
            tg_link_s: tg_link,
            pp: prompt as f64 / pp_time,
            tg_bytes: row + logits / n as f64,
        }
    }
}

/// The table of predictions for each shape at each host count.
pub fn table(shapes: &[Shape], hosts: &[usize], link: Link, m: Measured, prompt: usize, ubatch: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<16} {:>5} {:>6} {:>10} {:>12} {:>10} {:>12}",
        "model", "hosts", "split", "tg t/s", "link ms/tok", "pp t/s", "sent KB/tok"
    );
    for shape in shapes {
        for &n in hosts {
            for tensor in [false, true] {
                if n == 1 && tensor {
                    continue;
                }
                let p = predict(shape, n, link, m, tensor, prompt, ubatch);
                let split = if n == 1 {
                    "none"
                } else if tensor {
                    "tensor"
                } else {
                    "layer"
                };
                let _ = writeln!(
                    out,
                    "{:<16} {:>5} {:>6} {:>10.2} {:>12.3} {:>10.1} {:>12.1}",
                    shape.name,
                    n,
                    split,
                    p.tg,
                    p.tg_link_s * 1e3,
                    p.pp,
                    p.tg_bytes / 1e3
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured() -> Measured {
        Measured { decode_s_per_byte: 1e-10, prompt_s_per_param_token: 1e-10 }
    }

    #[test]
    fn one_host_is_the_measured_speed_and_a_free_link_divides_tensor_compute() {
        let shape = Shape::named("llama-7b", 4.5).expect("shape");
        let free = Link { bytes_per_s: f64::INFINITY, latency_s: 0.0 };
        let one = predict(&shape, 1, free, measured(), false, 512, 64);
        assert!((one.tg - 1.0 / (1e-10 * shape.decode_bytes)).abs() / one.tg < 1e-12);
        let four = predict(&shape, 4, free, measured(), true, 512, 64);
        assert!((four.tg / one.tg - 4.0).abs() < 1e-9, "{}", four.tg / one.tg);
        // A layer split does not speed up one sequence's decode.
        let layer = predict(&shape, 4, free, measured(), false, 512, 64);
        assert!((layer.tg / one.tg - 1.0).abs() < 1e-9);
    }

    #[test]
    fn latency_bounds_the_tensor_split_and_counts_every_gate() {
        let shape = Shape::named("llama-70b", 4.5).expect("shape");
        let slow = Link { bytes_per_s: f64::INFINITY, latency_s: 1e-3 };
        let p = predict(&shape, 8, slow, measured(), true, 512, 64);
        // 160 all-reduces of 3 exchanges and an all-gather of 3 latencies.
        assert!((p.tg_link_s - (160.0 * 3.0 + 3.0) * 1e-3).abs() < 1e-9, "{}", p.tg_link_s);
        assert!(p.tg < 1.0 / p.tg_link_s);
    }

    #[test]
    fn the_named_shapes_have_their_sizes() {
        let b7 = Shape::named("llama-7b", 16.0).expect("7b").params();
        let b70 = Shape::named("llama-70b", 16.0).expect("70b").params();
        // Matrices without the token embedding: 6.6e9 and 68.7e9.
        assert!((6.4e9..6.8e9).contains(&b7), "{b7}");
        assert!((68.0e9..69.5e9).contains(&b70), "{b70}");
        assert!(Shape::named("llama-13b", 4.0).is_none());
    }
}
