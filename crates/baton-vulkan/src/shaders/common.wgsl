// Shared by every shader (build.rs puts it first): the bindings every
// pipeline has, dispatch indexing, and the stream's error word.
//
// Every pipeline has the same layout: `a` and `b` are the inputs (raw words:
// each op decodes its types), `out` is declared by the op (plain or atomic
// words), and `status` is the stream's error record, which the host reads
// after the computation: [count, value, limit, node].

@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(3) var<storage, read_write> status: array<atomic<u32>>;

const GROUP: u32 = 64u;

// The invocation's index over the whole dispatch: workgroups are laid out
// row-major over (x, y) because one dimension holds at most 65535.
fn global_id(wg: vec3<u32>, groups: vec3<u32>, local: u32) -> u32 {
    return (wg.y * groups.x + wg.x) * GROUP + local;
}

// The workgroup's index over the whole dispatch.
fn group_id(wg: vec3<u32>, groups: vec3<u32>) -> u32 {
    return wg.y * groups.x + wg.x;
}

// Records an error of node `node`: `value` was outside `0..limit`. The first
// invocation to fail writes the details; the host reports them.
fn fail(node: u32, value: u32, limit: u32) {
    let before = atomicAdd(&status[0], 1u);
    if before == 0u {
        atomicStore(&status[1], value);
        atomicStore(&status[2], limit);
        atomicStore(&status[3], node);
    }
}

// Byte `at` of `a`.
fn a_byte(at: u32) -> u32 {
    return (a[at >> 2u] >> ((at & 3u) * 8u)) & 0xffu;
}

// The 16-bit little-endian value at byte `at` of `a` (`at` even).
fn a_u16(at: u32) -> u32 {
    return (a[at >> 2u] >> ((at & 2u) * 8u)) & 0xffffu;
}

// An IEEE half in the low 16 bits of `bits`, widened exactly.
fn half_to_f32(bits: u32) -> f32 {
    return unpack2x16float(bits).x;
}

// A bfloat16 in the low 16 bits of `bits`, widened exactly.
fn bf16_to_f32(bits: u32) -> f32 {
    return bitcast<f32>(bits << 16u);
}

// f32 to IEEE half bits, rounding to nearest even (as the host's `half`
// crate does), with overflow to infinity, subnormals and NaN kept.
fn f32_to_half(v: f32) -> u32 {
    let x = bitcast<u32>(v);
    let sign = (x >> 16u) & 0x8000u;
    let exp = i32((x >> 23u) & 0xffu);
    let man = x & 0x7fffffu;
    if exp == 255 {
        // Infinity, or NaN with a quiet bit set.
        return sign | 0x7c00u | select(0u, 0x200u | (man >> 13u), man != 0u);
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        return sign | 0x7c00u;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        // Subnormal: shift the full mantissa, round to nearest even.
        let full = man | 0x800000u;
        let shift = u32(14 - e);
        let half_man = full >> shift;
        let rest = full & ((1u << shift) - 1u);
        let mid = 1u << (shift - 1u);
        let up = rest > mid || (rest == mid && (half_man & 1u) == 1u);
        return sign | (half_man + select(0u, 1u, up));
    }
    let half_man = man >> 13u;
    let rest = man & 0x1fffu;
    let up = rest > 0x1000u || (rest == 0x1000u && (half_man & 1u) == 1u);
    // A carry out of the mantissa correctly bumps the exponent.
    return sign | ((u32(e) << 10u) + half_man + select(0u, 1u, up));
}

// f32 to bfloat16 bits, rounding to nearest even; NaN stays NaN.
fn f32_to_bf16(v: f32) -> u32 {
    let x = bitcast<u32>(v);
    if (x & 0x7fffffffu) > 0x7f800000u {
        return (x >> 16u) | 0x40u;
    }
    return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}

// The 6-bit scale and min of sub-block `s` (0..8) of a Q4_K or Q5_K
// super-block at byte `at` of `a` (12 packed bytes from byte 4).
fn k_scale_min(at: u32, s: u32) -> vec2<f32> {
    let p = at + 4u;
    if s < 4u {
        return vec2<f32>(f32(a_byte(p + s) & 63u), f32(a_byte(p + s + 4u) & 63u));
    }
    let scale = (a_byte(p + s + 4u) & 15u) | ((a_byte(p + s - 4u) >> 6u) << 4u);
    let min = (a_byte(p + s + 4u) >> 4u) | ((a_byte(p + s) >> 6u) << 4u);
    return vec2<f32>(f32(scale), f32(min));
}

// Coordinates (c0, c1, c2, c3) of element i in row-major order over four
// dimensions, given dimensions 1..3 (dimension 0 follows).
fn coords4(i: u32, d1: u32, d2: u32, d3: u32) -> vec4<u32> {
    let c3 = i % d3;
    let r = i / d3;
    let c2 = r % d2;
    let r2 = r / d2;
    return vec4<u32>(r2 / d1, r2 % d1, c2, c3);
}

// The byte offset of coordinates c in a view with byte strides s.
fn strided(c: vec4<u32>, s: vec4<u32>) -> u32 {
    return c.x * s.x + c.y * s.y + c.z * s.z + c.w * s.w;
}
