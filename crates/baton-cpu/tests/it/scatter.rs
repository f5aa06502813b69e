//! `scatter_rows` into a KV cache: every target row is checked before any
//! is written, so a bad row index is an error that leaves the cache as it
//! was, and the rows written (ahead of which the executor asks for their
//! cache lines) land where the indices say.

use std::sync::Arc;

use baton_core::backend::{Bindings, Device, TensorRef};
use baton_core::graph::{Flags, Graph};
use baton_core::DType;
use baton_cpu::CpuDevice;

use crate::packed::{values, TIMEOUT};

const HEADS: usize = 3;
const DIM: usize = 64;
const CAP: usize = 40;

/// A cache `[HEADS, CAP, DIM]` of f32 seen by position, and `rows.len()`
/// new rows scattered into it.
/// What a scatter did: the cache before, the new rows, and the cache after
/// (`Err` with the step's error beside it when the step failed).
struct Outcome {
    before: Vec<f32>,
    new: Vec<f32>,
    after: Result<Vec<f32>, (String, Vec<f32>)>,
}

fn scatter(rows: &[i32]) -> Outcome {
    let mut g = Graph::new();
    let cache = g.leaf("cache", DType::F32, &[HEADS, CAP, DIM], Flags::STATE).expect("cache");
    let src = g.leaf("src", DType::F32, &[rows.len(), HEADS, DIM], Flags::INPUT).expect("src");
    let at = g.leaf("rows", DType::I32, &[rows.len()], Flags::INPUT).expect("rows");
    let by_position = g.permute(cache, &[1, 0, 2]).expect("permute");
    g.scatter_rows(by_position, src, at).expect("scatter_rows");
    let graph = Arc::new(g);
    let device = CpuDevice::new("cpu", Vec::new(), 2, 1.0).expect("device");
    let stream = device.new_stream().expect("stream");
    let before = values(HEADS * CAP * DIM, 7);
    let new = values(rows.len() * HEADS * DIM, 8);
    let tensor = |dtype, dims: &[usize]| -> TensorRef { device.alloc_tensor(dtype, dims).expect("tensor") };
    let (c, s, r) = (
        tensor(DType::F32, &[HEADS, CAP, DIM]),
        tensor(DType::F32, &[rows.len(), HEADS, DIM]),
        tensor(DType::I32, &[rows.len()]),
    );
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    stream.write_async(&c, bytes(&before)).expect("write").wait_within(TIMEOUT).expect("written");
    stream.write_async(&s, bytes(&new)).expect("write").wait_within(TIMEOUT).expect("written");
    let index_bytes: Vec<u8> = rows.iter().flat_map(|x| x.to_le_bytes()).collect();
    stream.write_async(&r, index_bytes).expect("write").wait_within(TIMEOUT).expect("written");
    let mut b = Bindings::new(&graph);
    b.bind_name("cache", c.clone()).expect("bind");
    b.bind_name("src", s).expect("bind");
    b.bind_name("rows", r).expect("bind");
    let outcome = stream.compute(b).expect("submitted").wait_timeout(TIMEOUT);
    // A failed step fails its stream; the cache is read through another.
    let reader = device.new_stream().expect("a second stream");
    let after = reader.read_into_async(&c, vec![0f32; HEADS * CAP * DIM]).expect("read").wait_within(TIMEOUT);
    let after = after.expect("read back");
    let after = outcome.map(|_| after.clone()).map_err(|e| (e.to_string(), after));
    Outcome { before, new, after }
}

#[test]
fn rows_land_at_their_indices_and_the_rest_stays() {
    // More rows than the executor asks for ahead of writing (16), in no
    // order, first and last positions among them.
    let rows: Vec<i32> = (0..20).map(|i| (i * 7 + 3) % CAP as i32).chain([0, CAP as i32 - 1]).collect();
    let Outcome { before, new, after } = scatter(&rows);
    let after = after.expect("the scatter runs");
    for h in 0..HEADS {
        for p in 0..CAP {
            let row = &after[(h * CAP + p) * DIM..][..DIM];
            let want = match rows.iter().rposition(|&x| x as usize == p) {
                Some(t) => &new[(t * HEADS + h) * DIM..][..DIM],
                None => &before[(h * CAP + p) * DIM..][..DIM],
            };
            assert_eq!(row, want, "head {h} position {p}");
        }
    }
}

#[test]
fn a_row_outside_the_cache_is_an_error_and_nothing_is_written() {
    for bad in [CAP as i32, -1, i32::MAX] {
        let Outcome { before, after, .. } = scatter(&[2, 5, bad, 9]);
        let (err, after) = after.expect_err("a row outside the cache");
        assert!(err.contains(&format!("row index {bad} outside 0..{CAP}")), "{err}");
        assert!(after == before, "rows 2 and 5, before the bad one, were written");
    }
}
