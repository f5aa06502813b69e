// The bindings and parameters of ScatterRows (scatter_rows.wgsl per store
// type, scatter_rows_q8_0.wgsl): src f32 rows (`a`), row indices (i32 words
// of `b`), the destination view's dimensions 1..3 and byte strides.

@group(0) @binding(2) var<storage, read_write> out: array<atomic<u32>>;

struct Params {
    src: u32,
    dst: u32,
    rows: u32,
    // Elements (blocks for Q8_0) of src.
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

// The destination row of src row `t`, or a failed computation (and None as
// -1) when it lies outside 0..N.
fn target_row(t: u32) -> i32 {
    let row = bitcast<i32>(b[p.rows + t]);
    if row < 0 || u32(row) >= p.outer {
        fail(p.node, u32(row), p.outer);
        return -1;
    }
    return row;
}
