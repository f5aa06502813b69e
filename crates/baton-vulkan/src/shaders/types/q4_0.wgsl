// Q4_0: blocks of 32, an f16 scale `d` then 16 bytes of nibbles (element j
// in the low nibble of byte j, element j + 16 in the high one);
// x = d * (q - 8).
const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 18u;

fn q4(at: u32, j: u32) -> f32 {
    let byte = a_byte(at + 2u + (j & 15u));
    return f32((byte >> ((j >> 4u) * 4u)) & 15u) - 8.0;
}

fn block_elem(at: u32, j: u32) -> f32 {
    return half_to_f32(a_u16(at)) * q4(at, j);
}

fn block_dot(at: u32, x: u32) -> f32 {
    let s = act_scale(x);
    var sum = 0.0;
    for (var j = 0u; j < 32u; j++) {
        sum += q4(at, j) * act_value(x, j, s.y);
    }
    return sum * (half_to_f32(a_u16(at)) * s.x);
}
