// y = x · wᵀ: x [B, M, K] contiguous f32 (words of `b`; for quantized
// weights, rounded to 8 bits first: act_q8.wgsl), w [Bw, N, K] in the
// type's blocks (bytes of `a`, rows contiguous, any strides between rows and
// batches), y [B, M, N] contiguous f32. Weight batches are shared by groups
// of x batches (grouped-query attention).
//
// Each workgroup computes 8 outputs with 8 invocations each: an invocation
// takes every 8th block of the row, and the 8 partial sums meet through
// subgroup shuffles, without workgroup barriers. Lanes 8i..8i+7 of a
// subgroup share an output (subgroups hold a multiple of 8 invocations on
// every device Baton opens, which the host checks).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(subgroup_id) subgroup: u32, @builtin(num_subgroups) subgroups: u32,
        @builtin(subgroup_size) subgroup_size: u32, @builtin(subgroup_invocation_id) lane: u32) {
    let o = (group_id(wg, groups) * subgroups + subgroup) * (subgroup_size / LANES) + lane / LANES;
    let part = lane % LANES;
    var sum = 0.0;
    if o < p.outputs {
        let j = o % p.n;
        let bi = o / p.n;
        let i = bi % p.m;
        let batch = bi / p.m;
        let w_row = weight_row(batch, j);
        let x_row = act_row(p.x, batch * p.m + i, p.k, p.k_blocks);
        for (var kb = part; kb < p.k_blocks; kb += LANES) {
            sum += block_dot(w_row + kb * BLOCK_BYTES, act_block(x_row, kb));
        }
    }
    // Every lane takes part in the shuffles (control flow is uniform here).
    sum += subgroupShuffleXor(sum, 1u);
    sum += subgroupShuffleXor(sum, 2u);
    sum += subgroupShuffleXor(sum, 4u);
    if o < p.outputs && part == 0u {
        out[p.y + o] = bitcast<u32>(sum);
    }
}
