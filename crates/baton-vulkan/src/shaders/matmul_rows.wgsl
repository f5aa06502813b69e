// y = x · wᵀ as matmul.wgsl, for several rows of x (prompts): an output
// invocation group takes four rows of x against one weight row, so each
// weight value is decoded once (`block_elem`) for four activation rows.
// Activations go through the type's act file (`act_row`, `act_scale`,
// `act_value`): rounded to 8 bits per block beforehand for quantized
// weights (quantize_act.wgsl), as the CPU does; as they are for floats. Rows past m repeat row m - 1 and are not
// written.

const ROWS: u32 = 4u;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(subgroup_id) subgroup: u32, @builtin(num_subgroups) subgroups: u32,
        @builtin(subgroup_size) subgroup_size: u32, @builtin(subgroup_invocation_id) lane: u32) {
    let o = (group_id(wg, groups) * subgroups + subgroup) * (subgroup_size / LANES) + lane / LANES;
    let part = lane % LANES;
    let tiles = (p.m + ROWS - 1u) / ROWS;
    var sum = vec4<f32>(0.0);
    var i0 = 0u;
    var batch = 0u;
    var j = 0u;
    if o < p.outputs {
        j = o % p.n;
        let bi = o / p.n;
        i0 = (bi % tiles) * ROWS;
        batch = bi / tiles;
        let w_row = weight_row(batch, j);
        let last = p.m - 1u;
        let r = batch * p.m + min(vec4<u32>(i0) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(last));
        let rows = vec4<u32>(act_row(p.x, r.x, p.k, p.k_blocks), act_row(p.x, r.y, p.k, p.k_blocks),
                             act_row(p.x, r.z, p.k, p.k_blocks), act_row(p.x, r.w, p.k, p.k_blocks));
        for (var kb = part; kb < p.k_blocks; kb += LANES) {
            let xb = vec4<u32>(act_block(rows.x, kb), act_block(rows.y, kb), act_block(rows.z, kb),
                               act_block(rows.w, kb));
            let s0 = act_scale(xb.x);
            let s1 = act_scale(xb.y);
            let s2 = act_scale(xb.z);
            let s3 = act_scale(xb.w);
            let at = w_row + kb * BLOCK_BYTES;
            var acc = vec4<f32>(0.0);
            for (var e = 0u; e < BLOCK_ELEMS; e++) {
                let v = vec4<f32>(act_value(xb.x, e, s0.y), act_value(xb.y, e, s1.y), act_value(xb.z, e, s2.y),
                                  act_value(xb.w, e, s3.y));
                acc += block_elem(at, e) * v;
            }
            sum += acc * vec4<f32>(s0.x, s1.x, s2.x, s3.x);
        }
    }
    // Every lane takes part in the shuffles (control flow is uniform here).
    sum += subgroupShuffleXor(sum, 1u);
    sum += subgroupShuffleXor(sum, 2u);
    sum += subgroupShuffleXor(sum, 4u);
    if o < p.outputs && part == 0u {
        let y = p.y + (batch * p.m + i0) * p.n + j;
        out[y] = bitcast<u32>(sum.x);
        if i0 + 1u < p.m {
            out[y + p.n] = bitcast<u32>(sum.y);
        }
        if i0 + 2u < p.m {
            out[y + 2u * p.n] = bitcast<u32>(sum.z);
        }
        if i0 + 3u < p.m {
            out[y + 3u * p.n] = bitcast<u32>(sum.w);
        }
    }
}
