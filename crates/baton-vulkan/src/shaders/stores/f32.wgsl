// Stores into f32 tensors.
const ELEM_BYTES: u32 = 4u;

// Writes `v` as the element at byte `at` of `out`.
fn store_elem(at: u32, v: f32) {
    atomicStore(&out[at >> 2u], bitcast<u32>(v));
}
