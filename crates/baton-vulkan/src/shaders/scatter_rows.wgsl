// Writes row t of contiguous f32 src [T, ..] (`a`) into row rows[t] (i32
// words of `b`) of a strided view dst [N, ..] of the store type. A row
// index outside 0..N is an error of the computation.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
    let i = global_id(wg, groups, local);
    if i >= p.n {
        return;
    }
    let t = i / p.per_row;
    let row = target_row(t);
    if row < 0 {
        return;
    }
    let e = u32(row) * p.per_row + i % p.per_row;
    let c = coords4(e, p.d1, p.d2, p.d3);
    store_elem(p.dst + strided(c, vec4<u32>(p.s0, p.s1, p.s2, p.s3)), bitcast<f32>(a[p.src + i]));
}
