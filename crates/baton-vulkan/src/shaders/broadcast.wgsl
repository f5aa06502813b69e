// `a + b` (`mode` 0) or `a * b` (1) over contiguous f32, `b` broadcast over
// `a` (each of its four dimensions equal to a's or 1).

@group(0) @binding(2) var<storage, read_write> out: array<u32>;

struct Params {
    a: u32,
    b: u32,
    y: u32,
    n: u32,
    // a's dimensions 1..3 (dimension 0 follows from n).
    a1: u32,
    a2: u32,
    a3: u32,
    // b's four dimensions.
    b0: u32,
    b1: u32,
    b2: u32,
    b3: u32,
    mode: u32,
}
var<immediate> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
    let i = global_id(wg, groups, local);
    if i >= p.n {
        return;
    }
    let c = coords4(i, p.a1, p.a2, p.a3) % vec4<u32>(p.b0, p.b1, p.b2, p.b3);
    let bi = ((c.x * p.b1 + c.y) * p.b2 + c.z) * p.b3 + c.w;
    let x = bitcast<f32>(a[p.a + i]);
    let y = bitcast<f32>(b[p.b + bi]);
    out[p.y + i] = bitcast<u32>(select(x * y, x + y, p.mode == 0u));
}
