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
    let c = coords4(i, p.d1, p.d2, p.d3);
    store_elem(p.dst + strided(c, vec4<u32>(p.s0, p.s1, p.s2, p.s3)), bitcast<f32>(a[p.src + i]));
}
