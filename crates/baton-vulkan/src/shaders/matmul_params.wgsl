// What matmul.wgsl and matmul_rows.wgsl share: the output binding, the
// invocations per output, the parameters, and where a weight row starts.

@group(0) @binding(2) var<storage, read_write> out: array<u32>;

// Invocations that share one output (see matmul.wgsl).
const LANES: u32 = 8u;

struct Params {
    x: u32,
    w: u32,
    y: u32,
    m: u32,
    n: u32,
    k: u32,
    k_blocks: u32,
    // x's second batch dimension, and the x batches per weight batch.
    x_b1: u32,
    group0: u32,
    group1: u32,
    // Weight strides in bytes: batch 0, batch 1, row.
    w_s0: u32,
    w_s1: u32,
    w_row: u32,
    // Outputs computed: batches * M * N (matmul), batches * ceil(M / 4) * N
    // (matmul_rows).
    outputs: u32,
}
var<immediate> p: Params;

// The first byte of weight row j for x batch `batch` (weight batches shared
// by groups of x batches).
fn weight_row(batch: u32, j: u32) -> u32 {
    let b0 = batch / p.x_b1;
    let b1 = batch % p.x_b1;
    return p.w + (b0 / p.group0) * p.w_s0 + (b1 / p.group1) * p.w_s1 + j * p.w_row;
}
