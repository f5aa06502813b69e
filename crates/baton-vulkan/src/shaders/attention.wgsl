// Fused attention (Op::Attention): one workgroup per query row (t, h).
// Keys (`a`) and values (`c`) are [Hk, S, D] of the types `KT` and `VT`
// (0 f32, 1 f16, 2 bf16, 3 q8_0, 4 q4_0: rows of blocks of 32 values, an f16
// scale then 32 signed bytes or 16 bytes of nibbles) at byte strides; queries (`b`) are f32 rows at word
// strides; positions are i32 words of `e`; the output is contiguous f32
// [T, H, D]. Position s is row s mod S of the keys and values (a ring of
// the last S positions for a sliding-window layer). Keys go 64 at a time (one per invocation) with a running
// maximum and sum, so no row of scores is kept; each invocation owns the
// output elements local, local + 64, ... (D <= 256, checked by the host).

@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(4) var<storage, read> c: array<u32>;
@group(0) @binding(5) var<storage, read> e: array<u32>;

struct Params {
    q: u32,
    q_t: u32,
    q_h: u32,
    k: u32,
    k_h: u32,
    k_s: u32,
    v: u32,
    v_h: u32,
    v_s: u32,
    positions: u32,
    y: u32,
    t_len: u32,
    heads: u32,
    group: u32,
    dim: u32,
    s_len: u32,
    scale: f32,
    window: u32,
    node: u32,
}
var<immediate> p: Params;
var<workgroup> probs: array<f32, 64>;
var<workgroup> partial: array<f32, 64>;

const LOWEST: f32 = -3.4028235e38;

// The word of `a` (`from_c` false) or `c` (true) holding byte `at`.
fn word_at(from_c: bool, at: u32) -> u32 {
    if from_c {
        return c[at >> 2u];
    }
    return a[at >> 2u];
}

// The 16 bits at byte `at` (even) of `a` or `c`.
fn half_bits(from_c: bool, at: u32) -> u32 {
    return (word_at(from_c, at) >> ((at & 2u) * 8u)) & 0xffffu;
}

// Element `i` of the row at byte `row` of `a` or `c`, of type `ty`, as f32.
fn element(from_c: bool, ty: u32, row: u32, i: u32) -> f32 {
    if ty == 0u {
        return bitcast<f32>(word_at(from_c, row + 4u * i));
    }
    if ty == 3u {
        let block = row + (i / 32u) * 34u;
        let at = block + 2u + i % 32u;
        let q = (word_at(from_c, at) >> ((at & 3u) * 8u)) & 0xffu;
        return half_to_f32(half_bits(from_c, block)) * f32((i32(q) << 24u) >> 24u);
    }
    if ty == 4u {
        // Value j of a block: the low nibble of byte j, or the high one of
        // byte j - 16; x = d (q - 8).
        let block = row + (i / 32u) * 18u;
        let j = i % 32u;
        let at = block + 2u + j % 16u;
        let q = (word_at(from_c, at) >> ((at & 3u) * 8u + (j / 16u) * 4u)) & 0xfu;
        return half_to_f32(half_bits(from_c, block)) * (f32(q) - 8.0);
    }
    let bits = half_bits(from_c, row + 2u * i);
    if ty == 1u {
        return half_to_f32(bits);
    }
    return bf16_to_f32(bits);
}

fn key(row: u32, i: u32) -> f32 {
    return element(false, KT, row, i);
}

fn value(row: u32, i: u32) -> f32 {
    return element(true, VT, row, i);
}

fn reduce_max(local: u32, x: f32) -> f32 {
    partial[local] = x;
    workgroupBarrier();
    for (var width = GROUP / 2u; width > 0u; width /= 2u) {
        if local < width {
            partial[local] = max(partial[local], partial[local + width]);
        }
        workgroupBarrier();
    }
    let r = partial[0];
    workgroupBarrier();
    return r;
}

fn reduce_sum(local: u32, x: f32) -> f32 {
    partial[local] = x;
    workgroupBarrier();
    for (var width = GROUP / 2u; width > 0u; width /= 2u) {
        if local < width {
            partial[local] += partial[local + width];
        }
        workgroupBarrier();
    }
    let r = partial[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
    let row = group_id(wg, groups);
    if row >= p.t_len * p.heads {
        return;
    }
    let t = row / p.heads;
    let h = row % p.heads;
    let g = h / p.group;
    let pos = bitcast<i32>(e[p.positions + t]);
    var first = 0u;
    var end = 0u;
    if pos >= 0 {
        end = u32(pos) + 1u;
        if p.window != 0u && end > p.window {
            first = end - p.window;
        }
        if end - first > p.s_len {
            // More positions than the cache's rows: an error of the graph.
            fail(p.node, end - first, p.s_len);
            first = end;
        }
    }
    let q0 = p.q + t * p.q_t + h * p.q_h;
    let k0 = p.k + g * p.k_h;
    let v0 = p.v + g * p.v_h;
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    var run_max = LOWEST;
    var run_sum = 0.0;
    for (var base = first; base < end; base += GROUP) {
        let s = base + local;
        var score = LOWEST;
        if s < end {
            var dot = 0.0;
            let ks = k0 + (s % p.s_len) * p.k_s;
            for (var i = 0u; i < p.dim; i++) {
                dot += bitcast<f32>(b[q0 + i]) * key(ks, i);
            }
            score = dot * p.scale;
        }
        let new_max = max(run_max, reduce_max(local, score));
        let correction = exp(run_max - new_max);
        var prob = 0.0;
        if s < end {
            prob = exp(score - new_max);
        }
        probs[local] = prob;
        run_sum = run_sum * correction + reduce_sum(local, prob);
        run_max = new_max;
        let n = min(GROUP, end - base);
        for (var r = 0u; r < 4u; r++) {
            let i = local + r * GROUP;
            if i < p.dim {
                var sum = acc[r] * correction;
                for (var j = 0u; j < n; j++) {
                    sum += probs[j] * value(v0 + ((base + j) % p.s_len) * p.v_s, i);
                }
                acc[r] = sum;
            }
        }
        workgroupBarrier();
    }
    var inverse = 0.0;
    if run_sum > 0.0 {
        inverse = 1.0 / run_sum;
    }
    for (var r = 0u; r < 4u; r++) {
        let i = local + r * GROUP;
        if i < p.dim {
            out[p.y + row * p.dim + i] = bitcast<u32>(acc[r] * inverse);
        }
    }
}
