// Rotary embedding of contiguous f32 x [T, H, D] at positions [T] (i32
// words of `b`): one invocation per output element. Pairs are adjacent
// (`neox` 0) or half a rotation apart (1); elements past `dims` are copied.

@group(0) @binding(2) var<storage, read_write> out: array<u32>;

struct Params {
    x: u32,
    y: u32,
    positions: u32,
    n: u32,
    heads: u32,
    head_dim: u32,
    dims: u32,
    neox: u32,
    base: f32,
    scale: f32,
    node: u32,
}
var<immediate> p: Params;

fn x_at(i: u32) -> f32 {
    return bitcast<f32>(a[p.x + i]);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
    let i = global_id(wg, groups, local);
    if i >= p.n {
        return;
    }
    let d = i % p.head_dim;
    let t = i / (p.heads * p.head_dim);
    let pos = bitcast<i32>(b[p.positions + t]);
    if pos < 0 {
        fail(p.node, u32(pos), 0u);
        return;
    }
    if d >= p.dims {
        out[p.y + i] = a[p.x + i];
        return;
    }
    let half_dims = p.dims / 2u;
    var pair: u32;
    var first: bool;
    if p.neox == 1u {
        pair = d % half_dims;
        first = d < half_dims;
    } else {
        pair = d / 2u;
        first = (d & 1u) == 0u;
    }
    let theta = f32(pos) * p.scale * pow(p.base, -2.0 * f32(pair) / f32(p.dims));
    let c = cos(theta);
    let s = sin(theta);
    var r: f32;
    if first {
        let other = select(i + 1u, i + half_dims, p.neox == 1u);
        r = x_at(i) * c - x_at(other) * s;
    } else {
        let other = select(i - 1u, i - half_dims, p.neox == 1u);
        r = x_at(other) * s + x_at(i) * c;
    }
    out[p.y + i] = bitcast<u32>(r);
}
