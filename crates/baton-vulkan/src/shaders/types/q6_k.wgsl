// Q6_K: super-blocks of 256: 128 bytes of low nibbles, 64 bytes of high 2
// bits, 16 signed 8-bit scales (sub-blocks of 16), f16 `d` at byte 208;
// x = d * sc * (q - 32).
const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 210u;

fn block_elem(at: u32, e: u32) -> f32 {
    let n = e / 128u;
    let r = (e % 128u) / 32u;
    let l = e % 32u;
    let low = (a_byte(at + 64u * n + 32u * (r % 2u) + l) >> (4u * (r / 2u))) & 15u;
    let high = (a_byte(at + 128u + 32u * n + l) >> (2u * r)) & 3u;
    let q = i32(low | (high << 4u)) - 32;
    let scale = (i32(a_byte(at + 192u + e / 16u)) << 24u) >> 24u;
    return half_to_f32(a_u16(at + 208u)) * f32(scale) * f32(q);
}

fn block_dot(at: u32, x: u32) -> f32 {
    let s = act_scale(x);
    var sum = 0.0;
    for (var e = 0u; e < 256u; e++) {
        sum += block_elem(at, e) * act_value(x, e, s.y);
    }
    return sum * s.x;
}
