// Writes row t of contiguous f32 src [T, ..] (`a`) into row rows[t] (i32
// words of `b`) of a strided view dst [N, ..] of 32-value blocks (a
// quantized KV cache): one invocation per block, quantized by the block
// type's `store_block` (stores/block_*.wgsl), as the host's reference
// quantizer does. The view's last dimension is whole blocks of
// BLOCK_BYTES (its stride), its other strides are bytes. A row index
// outside 0..N is an error of the computation.

// The 16 bits `v` at byte `at` (even) of `out`, merged into their word with
// two atomics on disjoint bits, so neighbouring blocks written by other
// invocations are kept.
fn store_half(at: u32, v: u32) {
    let shift = (at & 2u) * 8u;
    atomicAnd(&out[at >> 2u], ~(0xffffu << shift));
    atomicOr(&out[at >> 2u], (v & 0xffffu) << shift);
}

// `r` rounded to the nearest integer, halves away from zero (Rust's
// `f32::round`; WGSL's `round` takes halves to even).
fn round_away(r: f32) -> i32 {
    let whole = trunc(r);
    if abs(r - whole) == 0.5 {
        return i32(whole + sign(r));
    }
    return i32(round(r));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
    let i = global_id(wg, groups, local);
    if i >= p.n {
        return;
    }
    let blocks_per_row = p.per_row / 32u;
    let t = i / blocks_per_row;
    let block = i % blocks_per_row;
    let row = target_row(t);
    if row < 0 {
        return;
    }
    let src = p.src + t * p.per_row + block * 32u;
    var c = coords4(u32(row) * p.per_row + block * 32u, p.d1, p.d2, p.d3);
    c.w = c.w / 32u;
    let at = p.dst + strided(c, vec4<u32>(p.s0, p.s1, p.s2, p.s3));
    store_block(src, at);
}
