// Activations of a quantized matmul, rounded to 8 bits as the CPU backend
// does (baton-kernels `activation.rs`), so that both backends compute on the
// same values: per weight block (32 values, or a K-quant's 256),
// d = amax / 127 and q = round-half-even(x * (1 / d)). A block's dot product
// multiplies the weights by q and scales by d once.

// (d, 1 / d) of the activations x[x .. x + BLOCK_ELEMS] (words of `b`).
fn act_scale(x: u32) -> vec2<f32> {
    var amax = 0.0;
    for (var e = 0u; e < BLOCK_ELEMS; e++) {
        amax = max(amax, abs(bitcast<f32>(b[x + e])));
    }
    let d = amax / 127.0;
    return vec2<f32>(d, select(0.0, 1.0 / d, d != 0.0));
}

// Activation e of the block at x as its 8-bit integer (-127..=127).
fn act_q(x: u32, e: u32, id: f32) -> f32 {
    return round(bitcast<f32>(b[x + e]) * id);
}

// The value a dot product multiplies: the 8-bit integer (times d later).
fn act_value(x: u32, e: u32, id: f32) -> f32 {
    return act_q(x, e, id);
}
