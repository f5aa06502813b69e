// f32 weights and tables: blocks of one element.
const BLOCK_ELEMS: u32 = 1u;
const BLOCK_BYTES: u32 = 4u;

// Element `j` of the block at byte `at` of `a`.
fn block_elem(at: u32, j: u32) -> f32 {
    return bitcast<f32>(a[at >> 2u]);
}

// The block at byte `at` of `a` times the f32 values from word `x` of `b`.
fn block_dot(at: u32, x: u32) -> f32 {
    return bitcast<f32>(a[at >> 2u]) * bitcast<f32>(b[x]);
}
