// RMS norm over rows of contiguous f32: one workgroup per row.

@group(0) @binding(2) var<storage, read_write> out: array<u32>;

struct Params {
    x: u32,
    y: u32,
    rows: u32,
    cols: u32,
    eps: f32,
}
var<immediate> p: Params;
var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
    let row = group_id(wg, groups);
    if row >= p.rows {
        return;
    }
    let base = row * p.cols;
    var sum = 0.0;
    for (var c = local; c < p.cols; c += GROUP) {
        let v = bitcast<f32>(a[p.x + base + c]);
        sum += v * v;
    }
    partial[local] = sum;
    workgroupBarrier();
    for (var width = GROUP / 2u; width > 0u; width /= 2u) {
        if local < width {
            partial[local] += partial[local + width];
        }
        workgroupBarrier();
    }
    let scale = 1.0 / sqrt(partial[0] / f32(p.cols) + p.eps);
    for (var c = local; c < p.cols; c += GROUP) {
        out[p.y + base + c] = bitcast<u32>(bitcast<f32>(a[p.x + base + c]) * scale);
    }
}
