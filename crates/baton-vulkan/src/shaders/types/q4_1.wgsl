// Q4_1: blocks of 32, an f16 scale `d`, an f16 minimum `m`, then 16 bytes of
// nibbles laid out as Q4_0's; x = d * q + m.
const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 20u;

fn q4(at: u32, j: u32) -> f32 {
    let byte = a_byte(at + 4u + (j & 15u));
    return f32((byte >> ((j >> 4u) * 4u)) & 15u);
}

fn block_elem(at: u32, j: u32) -> f32 {
    return half_to_f32(a_u16(at)) * q4(at, j) + half_to_f32(a_u16(at + 2u));
}

fn block_dot(at: u32, x: u32) -> f32 {
    let s = act_scale(x);
    var sum = 0.0;
    var qs = 0.0;
    for (var j = 0u; j < 32u; j++) {
        let q = act_value(x, j, s.y);
        sum += q4(at, j) * q;
        qs += q;
    }
    return sum * (half_to_f32(a_u16(at)) * s.x) + half_to_f32(a_u16(at + 2u)) * (s.x * qs);
}
