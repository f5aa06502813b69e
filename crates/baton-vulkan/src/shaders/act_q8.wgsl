// Activations of a quantized matmul, rounded to 8 bits before the matmul by
// `quantize_act.wgsl` as the CPU backend rounds them (`Op::MatMul`): per
// weight block (32 values, or a K-quant's 256) one f32 word `d`, then the
// values `q` packed four to a word (first value in the low byte). A block's
// dot product multiplies the weights by q and scales by d once.

// Words of one block of activations.
const ACT_WORDS: u32 = 1u + BLOCK_ELEMS / 4u;

// The first word of row `row` of the activations starting at word `x0`.
fn act_row(x0: u32, row: u32, k: u32, k_blocks: u32) -> u32 {
    return x0 + row * k_blocks * ACT_WORDS;
}

// The first word of block `kb` of the row at `row_at`.
fn act_block(row_at: u32, kb: u32) -> u32 {
    return row_at + kb * ACT_WORDS;
}

// (d, 1) of the block at x.
fn act_scale(x: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(b[x]), 1.0);
}

// Value e of the block at x: its 8-bit integer (-127..=127).
fn act_value(x: u32, e: u32, id: f32) -> f32 {
    return f32(extractBits(bitcast<i32>(b[x + 1u + e / 4u]), (e % 4u) * 8u, 8u));
}
