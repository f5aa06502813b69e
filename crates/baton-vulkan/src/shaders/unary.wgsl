// Element-wise ops on contiguous f32: `mode` 0 scales by `factor`, 1 is SiLU,
// 2 is GELU in its tanh form, computed as x * sigmoid(2y) (equal to
// 0.5 x (1 + tanh(y)), y = sqrt(2/pi) (x + 0.044715 x^3)).

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
    } else if p.mode == 1u {
        r = v / (1.0 + exp(-v));
    } else {
        let y = 0.7978846 * (v + 0.044715 * v * v * v);
        r = v / (1.0 + exp(clamp(-2.0 * y, -87.0, 87.0)));
    }
    out[p.y + i] = bitcast<u32>(r);
}
