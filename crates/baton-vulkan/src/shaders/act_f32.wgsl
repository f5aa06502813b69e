// Activations of a float matmul: f32 words, used as they are (the
// interface of act_q8.wgsl with d = 1).

fn act_row(x0: u32, row: u32, k: u32, k_blocks: u32) -> u32 {
    return x0 + row * k;
}

fn act_block(row_at: u32, kb: u32) -> u32 {
    return row_at + kb * BLOCK_ELEMS;
}

fn act_scale(x: u32) -> vec2<f32> {
    return vec2<f32>(1.0, 1.0);
}

fn act_value(x: u32, e: u32, id: f32) -> f32 {
    return bitcast<f32>(b[x + e]);
}
