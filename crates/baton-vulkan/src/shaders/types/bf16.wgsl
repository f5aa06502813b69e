// bf16 weights and tables: blocks of one element.
const BLOCK_ELEMS: u32 = 1u;
const BLOCK_BYTES: u32 = 2u;

fn block_elem(at: u32, j: u32) -> f32 {
    return bf16_to_f32(a_u16(at));
}

fn block_dot(at: u32, x: u32) -> f32 {
    return bf16_to_f32(a_u16(at)) * bitcast<f32>(b[x]);
}
