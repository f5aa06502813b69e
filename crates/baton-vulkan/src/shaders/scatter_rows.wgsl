// Writes row t of contiguous f32 src [T, ..] (`a`) into row rows[t] (i32
// words of `b`) of a strided view dst [N, ..] of the store type. A row
// index outside 0..N is an error of the computation.

@group(0) @binding(2) var<storage, read_write> out: array<atomic<u32>>;

struct Params {
    src: u32,
    dst: u32,
    rows: u32,
    n: u32,
    // Destination rows N, and elements per row of the outer dimension.
    outer: u32,
    per_row: u32,
    d1: u32,
    d2: u32,
    d3: u32,
    s0: u32,
    s1: u32,
    s2: u32,
    s3: u32,
    node: u32,
}
var<immediate> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
    let i = global_id(wg, groups, local);
    if i >= p.n {
        return;
    }
    let t = i / p.per_row;
    let target_row = bitcast<i32>(b[p.rows + t]);
    if target_row < 0 || u32(target_row) >= p.outer {
        fail(p.node, u32(target_row), p.outer);
        return;
    }
    let e = u32(target_row) * p.per_row + i % p.per_row;
    let c = coords4(e, p.d1, p.d2, p.d3);
    store_elem(p.dst + strided(c, vec4<u32>(p.s0, p.s1, p.s2, p.s3)), bitcast<f32>(a[p.src + i]));
}
