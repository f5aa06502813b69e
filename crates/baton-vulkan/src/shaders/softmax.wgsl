// Softmax over rows of contiguous f32 [.., T, S] after scaling: one
// workgroup per row. With `causal`, row t sees keys up to t + (S - T), or,
// with positions (i32 words of `b`), up to positions[t]; masked keys are 0.
// A `window` (non-zero, positions only) also hides the keys before the last
// `window` visible ones.

@group(0) @binding(2) var<storage, read_write> out: array<u32>;

struct Params {
    x: u32,
    y: u32,
    rows: u32,
    s_len: u32,
    t_len: u32,
    scale: f32,
    causal: u32,
    has_positions: u32,
    positions: u32,
    window: u32,
}
var<immediate> p: Params;
var<workgroup> partial: array<f32, 64>;

fn visible_keys(row: u32) -> u32 {
    if p.causal == 0u {
        return p.s_len;
    }
    let t = row % p.t_len;
    if p.has_positions == 1u {
        let pos = bitcast<i32>(b[p.positions + t]);
        if pos < 0 {
            return 0u;
        }
        return min(u32(pos) + 1u, p.s_len);
    }
    if t + 1u + p.s_len <= p.t_len {
        return 0u;
    }
    return min(t + 1u + p.s_len - p.t_len, p.s_len);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
    let row = group_id(wg, groups);
    if row >= p.rows {
        return;
    }
    let base = row * p.s_len;
    let visible = visible_keys(row);
    var first = 0u;
    if p.window != 0u && visible > p.window {
        first = visible - p.window;
    }
    var top = -3.4028235e38;
    for (var c = first + local; c < visible; c += GROUP) {
        top = max(top, bitcast<f32>(a[p.x + base + c]) * p.scale);
    }
    partial[local] = top;
    workgroupBarrier();
    for (var width = GROUP / 2u; width > 0u; width /= 2u) {
        if local < width {
            partial[local] = max(partial[local], partial[local + width]);
        }
        workgroupBarrier();
    }
    let row_max = partial[0];
    workgroupBarrier();
    var sum = 0.0;
    for (var c = first + local; c < visible; c += GROUP) {
        sum += exp(bitcast<f32>(a[p.x + base + c]) * p.scale - row_max);
    }
    partial[local] = sum;
    workgroupBarrier();
    for (var width = GROUP / 2u; width > 0u; width /= 2u) {
        if local < width {
            partial[local] += partial[local + width];
        }
        workgroupBarrier();
    }
    let inv = 1.0 / partial[0];
    for (var c = local; c < p.s_len; c += GROUP) {
        var v = 0.0;
        if c >= first && c < visible {
            v = exp(bitcast<f32>(a[p.x + base + c]) * p.scale - row_max) * inv;
        }
        out[p.y + base + c] = bitcast<u32>(v);
    }
}
