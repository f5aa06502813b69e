// Row lookup: rows of the table (`a`, in the type's blocks) at ids [T]
// (i32 words of `b`), dequantized to contiguous f32 [T, D]. An id outside
// the table is an error of the computation.

@group(0) @binding(2) var<storage, read_write> out: array<u32>;

struct Params {
    table: u32,
    ids: u32,
    y: u32,
    tokens: u32,
    width: u32,
    vocab: u32,
    row_stride: u32,
    node: u32,
}
var<immediate> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
    let i = global_id(wg, groups, local);
    if i >= p.tokens * p.width {
        return;
    }
    let t = i / p.width;
    let j = i % p.width;
    let id = bitcast<i32>(b[p.ids + t]);
    if id < 0 || u32(id) >= p.vocab {
        fail(p.node, u32(id), p.vocab);
        out[p.y + i] = 0u;
        return;
    }
    let block = p.table + u32(id) * p.row_stride + (j / BLOCK_ELEMS) * BLOCK_BYTES;
    out[p.y + i] = bitcast<u32>(block_elem(block, j % BLOCK_ELEMS));
}
