// Q4_0 blocks for scatter_rows_block.wgsl, as the host's reference
// quantizer writes them: d = max / -8 with max the value of largest
// magnitude, sign kept (stored as f16); level = min(trunc(x / d + 8 + 0.5),
// 15); byte j holds levels j (low nibble) and j + 16 (high).
const BLOCK_BYTES: u32 = 18u;

fn level(x: f32, id: f32) -> u32 {
    return min(u32(max((x * id + 8.0) + 0.5, 0.0)), 15u);
}

fn store_block(src: u32, at: u32) {
    var amax = 0.0;
    var signed_max = 0.0;
    for (var k = 0u; k < 32u; k++) {
        let x = bitcast<f32>(a[src + k]);
        if amax < abs(x) {
            amax = abs(x);
            signed_max = x;
        }
    }
    let d = signed_max / -8.0;
    var id = 0.0;
    if d != 0.0 {
        id = 1.0 / d;
    }
    store_half(at, f32_to_half(d));
    for (var k = 0u; k < 8u; k++) {
        let j = 2u * k;
        let lo = level(bitcast<f32>(a[src + j]), id) | (level(bitcast<f32>(a[src + j + 16u]), id) << 4u);
        let hi = level(bitcast<f32>(a[src + j + 1u]), id) | (level(bitcast<f32>(a[src + j + 17u]), id) << 4u);
        store_half(at + 2u + j, lo | (hi << 8u));
    }
}
