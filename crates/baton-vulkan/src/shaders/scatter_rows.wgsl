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
    let c3 = e % p.d3;
    let r = e / p.d3;
    let c2 = r % p.d2;
    let r2 = r / p.d2;
    let c1 = r2 % p.d1;
    let c0 = r2 / p.d1;
    store_elem(p.dst + c0 * p.s0 + c1 * p.s1 + c2 * p.s2 + c3 * p.s3, bitcast<f32>(a[p.src + i]));
}
