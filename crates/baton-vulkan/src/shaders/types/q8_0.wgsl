// Q8_0: blocks of 32, an f16 scale `d` then 32 signed bytes; x = d * q.
const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 34u;

fn q8(at: u32, j: u32) -> f32 {
    return f32((i32(a_byte(at + 2u + j)) << 24u) >> 24u);
}

fn block_elem(at: u32, j: u32) -> f32 {
    return half_to_f32(a_u16(at)) * q8(at, j);
}

fn block_dot(at: u32, x: u32) -> f32 {
    let s = act_scale(x);
    var sum = 0.0;
    for (var j = 0u; j < 32u; j++) {
        sum += q8(at, j) * act_value(x, j, s.y);
    }
    return sum * (half_to_f32(a_u16(at)) * s.x);
}
