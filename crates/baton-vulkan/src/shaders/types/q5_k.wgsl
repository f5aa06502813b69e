// Q5_K: as Q4_K, plus 32 bytes (from byte 16) holding each value's fifth
// bit (bit s of byte l for element l of sub-block s); nibbles from byte 48.
const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 176u;

fn block_elem(at: u32, e: u32) -> f32 {
    let s = e / 32u;
    let l = e % 32u;
    let low = (a_byte(at + 48u + 32u * (s / 2u) + l) >> (4u * (s % 2u))) & 15u;
    let q = low | (((a_byte(at + 16u + l) >> s) & 1u) << 4u);
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
