// A strided view (bytes of `a`, any type) copied to contiguous memory, one
// output word per invocation, each byte gathered from its source. Rows of a
// block type are contiguous, so they move whole. The bytes of a last partial
// word outside the output are kept.

@group(0) @binding(2) var<storage, read_write> out: array<atomic<u32>>;

struct Params {
    src: u32,
    dst: u32,
    bytes: u32,
    row_bytes: u32,
    elem_bytes: u32,
    inner: u32,
    rows_contiguous: u32,
    d1: u32,
    d2: u32,
    s0: u32,
    s1: u32,
    s2: u32,
}
var<immediate> p: Params;

fn source_byte(o: u32) -> u32 {
    let r = o / p.row_bytes;
    let c = o % p.row_bytes;
    var at = p.src + strided(coords4(r, p.d1, p.d2, 1u), vec4<u32>(p.s0, p.s1, p.s2, 0u));
    if p.rows_contiguous == 1u {
        at += c;
    } else {
        at += (c / p.elem_bytes) * p.inner + c % p.elem_bytes;
    }
    return a_byte(at);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
    let w = global_id(wg, groups, local);
    let first = w * 4u;
    if first >= p.bytes {
        return;
    }
    var word = 0u;
    var mask = 0u;
    for (var k = 0u; k < 4u; k++) {
        if first + k < p.bytes {
            word |= source_byte(first + k) << (k * 8u);
            mask |= 0xffu << (k * 8u);
        }
    }
    let at = (p.dst >> 2u) + w;
    if mask == 0xffffffffu {
        atomicStore(&out[at], word);
    } else {
        atomicAnd(&out[at], ~mask);
        atomicOr(&out[at], word);
    }
}
