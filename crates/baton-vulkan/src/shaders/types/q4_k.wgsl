// Q4_K: super-blocks of 256: f16 `d` and `dmin`, 12 bytes of 6-bit scales
// and mins of 8 sub-blocks of 32, then 128 bytes of nibbles (sub-blocks 2i
// and 2i + 1 share 32 bytes, low and high nibbles); x = d * sc * q - dmin * m.
const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 144u;

fn block_elem(at: u32, e: u32) -> f32 {
    let s = e / 32u;
    let q = (a_byte(at + 16u + 32u * (s / 2u) + e % 32u) >> (4u * (s % 2u))) & 15u;
    let sm = k_scale_min(at, s);
    return half_to_f32(a_u16(at)) * sm.x * f32(q) - half_to_f32(a_u16(at + 2u)) * sm.y;
}

fn block_dot(at: u32, x: u32) -> f32 {
    let s = act_scale(x);
    var sum = 0.0;
    for (var e = 0u; e < 256u; e++) {
        sum += block_elem(at, e) * act_value(x, e, s.y);
    }
    return sum * s.x;
}
