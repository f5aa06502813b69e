// Q8_0 blocks for scatter_rows_block.wgsl, as the host's reference
// quantizer writes them: d = amax / 127 (stored as f16), q = x / d rounded
// half away from zero, 32 signed bytes.
const BLOCK_BYTES: u32 = 34u;

fn store_block(src: u32, at: u32) {
    var amax = 0.0;
    for (var k = 0u; k < 32u; k++) {
        amax = max(amax, abs(bitcast<f32>(a[src + k])));
    }
    let d = amax / 127.0;
    var id = 0.0;
    if d != 0.0 {
        id = 1.0 / d;
    }
    store_half(at, f32_to_half(d));
    for (var k = 0u; k < 16u; k++) {
        let lo = u32(round_away(bitcast<f32>(a[src + 2u * k]) * id)) & 0xffu;
        let hi = u32(round_away(bitcast<f32>(a[src + 2u * k + 1u]) * id)) & 0xffu;
        store_half(at + 2u + 2u * k, lo | (hi << 8u));
    }
}
