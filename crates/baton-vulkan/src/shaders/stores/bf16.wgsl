// Stores into bf16 tensors, merged into their words as f16's are.
const ELEM_BYTES: u32 = 2u;

fn store_elem(at: u32, v: f32) {
    let shift = (at & 2u) * 8u;
    atomicAnd(&out[at >> 2u], ~(0xffffu << shift));
    atomicOr(&out[at >> 2u], f32_to_bf16(v) << shift);
}
