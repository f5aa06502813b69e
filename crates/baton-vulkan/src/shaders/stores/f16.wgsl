// Stores into f16 tensors: a half word is merged into its 32-bit word with
// two atomics on disjoint bits, so neighbours written by other invocations
// are kept.
const ELEM_BYTES: u32 = 2u;

fn store_elem(at: u32, v: f32) {
    let shift = (at & 2u) * 8u;
    atomicAnd(&out[at >> 2u], ~(0xffffu << shift));
    atomicOr(&out[at >> 2u], f32_to_half(v) << shift);
}
