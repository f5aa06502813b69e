// Activations rounded to 8 bits for a quantized matmul, as `Op::MatMul`
// states and the CPU backend does: per block of BLOCK_ELEMS values of x
// (f32 words of `b`), d = amax / 127 and q = round-half-even(x * (1 / d))
// (q = 0 where d = 0), written as one word d then the values packed four to
// a word (act_q8.wgsl reads them). One invocation per block.

@group(0) @binding(2) var<storage, read_write> out: array<u32>;

struct Params {
    x: u32,
    y: u32,
    blocks: u32,
}
var<immediate> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
    let block = global_id(wg, groups, local);
    if block >= p.blocks {
        return;
    }
    let x = p.x + block * BLOCK_ELEMS;
    var amax = 0.0;
    for (var e = 0u; e < BLOCK_ELEMS; e++) {
        amax = max(amax, abs(bitcast<f32>(b[x + e])));
    }
    let d = amax / 127.0;
    let id = select(0.0, 1.0 / d, d != 0.0);
    let y = p.y + block * (1u + BLOCK_ELEMS / 4u);
    out[y] = bitcast<u32>(d);
    for (var w = 0u; w < BLOCK_ELEMS / 4u; w++) {
        var packed = 0u;
        for (var i = 0u; i < 4u; i++) {
            let q = i32(round(bitcast<f32>(b[x + 4u * w + i]) * id));
            packed |= (bitcast<u32>(q) & 255u) << (8u * i);
        }
        out[y + 1u + w] = packed;
    }
}
