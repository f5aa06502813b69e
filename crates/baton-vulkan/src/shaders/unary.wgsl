// Element-wise ops on contiguous f32: `mode` 0 scales by `factor`, 1 is SiLU.

@group(0) @binding(2) var<storage, read_write> out: array<u32>;

struct Params {
    x: u32,
    y: u32,
    n: u32,
    mode: u32,
    factor: f32,
}
var<immediate> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
    let i = global_id(wg, groups, local);
    if i >= p.n {
        return;
    }
    let v = bitcast<f32>(a[p.x + i]);
    var r: f32;
    if p.mode == 0u {
        r = v * p.factor;
    } else {
        r = v / (1.0 + exp(-v));
    }
    out[p.y + i] = bitcast<u32>(r);
}
