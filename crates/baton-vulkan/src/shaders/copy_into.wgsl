// Writes contiguous f32 `a` into a strided view of the store type: source
// element i goes to destination element i in the row-major order of the
// view's four dimensions (byte strides).

@group(0) @binding(2) var<storage, read_write> out: array<atomic<u32>>;

struct Params {
    src: u32,
    dst: u32,
    n: u32,
    d1: u32,
    d2: u32,
    d3: u32,
    s0: u32,
    s1: u32,
    s2: u32,
    s3: u32,
}
var<immediate> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
    let i = global_id(wg, groups, local);
    if i >= p.n {
        return;
    }
    let c3 = i % p.d3;
    let r = i / p.d3;
    let c2 = r % p.d2;
    let r2 = r / p.d2;
    let c1 = r2 % p.d1;
    let c0 = r2 / p.d1;
    store_elem(p.dst + c0 * p.s0 + c1 * p.s1 + c2 * p.s2 + c3 * p.s3, bitcast<f32>(a[p.src + i]));
}
