//! What every op case uses: leaves filled between guard bytes, a run on
//! device 0, the guard bytes checked afterwards, and the NMSE bound.

use std::collections::HashMap;
use std::sync::Arc;

use baton_core::backend::{as_bytes, Bindings, TensorRef};
use baton_core::graph::{Graph, NodeId};
use baton_core::DType;

use crate::reference as r;
use crate::util::{Fixture, RULE_TIMEOUT};

/// Bytes of sentinel before and after each bound tensor.
const GUARD: usize = 64;
/// The sentinel byte.
const SENTINEL: u8 = 0xA5;
/// Bound for plain float types.
pub const FLOAT_NMSE: f64 = 1e-7;
/// Bound for quantized weights: the reference rounds activations as
/// `Op::MatMul` states, so only the order of f32 sums may differ (a backend
/// that kept f32 activations would be off by about 1e-5).
pub const QUANT_NMSE: f64 = 1e-9;

/// A leaf's data.
pub(crate) struct Input {
    pub(crate) name: &'static str,
    pub(crate) bytes: Vec<u8>,
}

pub(crate) fn input_f32(name: &'static str, values: &[f32]) -> Input {
    Input { name, bytes: as_bytes(values).to_vec() }
}

pub(crate) fn input_i32(name: &'static str, values: &[i32]) -> Input {
    Input { name, bytes: as_bytes(values).to_vec() }
}

/// Runs `graph` on device 0 with every bound tensor between guard bytes;
/// returns the bytes of every bound tensor afterwards, by name.
pub(crate) fn run(f: &Fixture, graph: Graph, inputs: Vec<Input>) -> HashMap<String, Vec<u8>> {
    let graph = Arc::new(graph);
    let s = f.stream(0);
    let mut bindings = Bindings::new(&graph);
    let mut given: HashMap<&str, Vec<u8>> = inputs.into_iter().map(|i| (i.name, i.bytes)).collect();
    let mut bound = Vec::new();
    for id in graph.bound_nodes().collect::<Vec<NodeId>>() {
        let node = graph.node(id);
        let name = node.name.clone().expect("bound tensors of op cases are named");
        let bytes = node.layout.end_byte(node.dtype);
        let total = (bytes + 2 * GUARD).div_ceil(4) * 4;
        let buffer = f.buffer(0, total);
        let mut fill = vec![SENTINEL; total];
        if let Some(data) = given.remove(name.as_str()) {
            assert_eq!(data.len(), bytes, "input {name} has the wrong size");
            fill[GUARD..GUARD + bytes].copy_from_slice(&data);
        }
        let whole = TensorRef::new(&buffer, 0, DType::I32, &[total / 4]).expect("whole");
        s.write_async(&whole, fill).expect("write").wait_within(RULE_TIMEOUT).expect("fill");
        let t = TensorRef::new(&buffer, GUARD, node.dtype, node.layout.shape.dims()).expect("tensor");
        bindings.bind(id, t).expect("bind");
        bound.push((name, whole, bytes));
    }
    assert!(given.is_empty(), "inputs without a leaf: {:?}", given.keys().collect::<Vec<_>>());
    s.compute(bindings).expect("compute").wait_timeout(RULE_TIMEOUT).expect("compute ran");
    let mut out = HashMap::new();
    for (name, whole, bytes) in bound {
        let all = s.read_async(&whole).expect("read").wait_within(RULE_TIMEOUT).expect("read");
        let (before, rest) = all.split_at(GUARD);
        let (data, after) = rest.split_at(bytes);
        assert!(before.iter().all(|&b| b == SENTINEL), "{name}: a byte before the tensor was written");
        assert!(after.iter().all(|&b| b == SENTINEL), "{name}: a byte after the tensor was written");
        out.insert(name, data.to_vec());
    }
    out
}

pub(crate) fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

pub(crate) fn f64s(values: &[f32]) -> Vec<f64> {
    values.iter().map(|&v| f64::from(v)).collect()
}

pub(crate) fn check(what: &str, actual: &[f32], expected: &[f64], bound: f64) {
    let e = r::nmse(actual, expected);
    assert!(
        e <= bound,
        "{what}: NMSE {e:e} above {bound:e}\nexpected {:?}\nactual   {:?}",
        &expected[..expected.len().min(8)],
        &actual[..actual.len().min(8)]
    );
}

/// Encodes values as a row-major tensor of `dtype`.
pub(crate) fn encode(dtype: DType, values: &[f32]) -> Vec<u8> {
    if dtype.is_quantized() {
        r::encode_blocks(dtype, values)
    } else {
        r::encode_float_row(dtype, values)
    }
}
