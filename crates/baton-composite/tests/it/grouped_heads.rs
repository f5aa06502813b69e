//! Grouped-query attention split by query heads that do not fall on group
//! boundaries (SmolLM2's 9 heads and 3 key heads over 2 devices: 5 and 4
//! heads): each device holds the key heads of its heads' groups, so a group
//! split between two devices has its key head on both (overlapping parts),
//! and the device computes that group's heads against it piece by piece.
//! `o = (q · kᵀ) · v` per head, head `h` with key head `h / group`, checked
//! against a host reference on 2 and 3 devices, with no gate before the
//! output's gather.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use baton_composite::{CompositeDevice, GateKind, Partition, TensorSplit};
use baton_conformance::random;
use baton_core::backend::{Bindings, Device};
use baton_core::graph::{Flags, Graph};
use baton_core::sync::WaitPolicy;
use baton_core::DType;

const HEADS: usize = 9;
const KV: usize = 3;
const GROUP: usize = HEADS / KV;
const T: usize = 2;
const N: usize = 5;
const K: usize = 8;
const DV: usize = 4;

/// `scores = q · kᵀ` ([HEADS, T, N]), `o = scores · vᵀ` ([HEADS, T, DV]).
fn graph() -> Arc<Graph> {
    let mut g = Graph::new();
    let q = g.leaf("q", DType::F32, &[HEADS, T, K], Flags::INPUT).expect("q");
    let k = g.leaf("k", DType::F32, &[KV, N, K], Flags::WEIGHT).expect("k");
    let v = g.leaf("v", DType::F32, &[KV, DV, N], Flags::WEIGHT).expect("v");
    let scores = g.matmul(q, k).expect("scores");
    let o = g.matmul(scores, v).expect("o");
    g.mark(o, Flags::OUTPUT).expect("mark");
    g.set_name(o, "o").expect("name");
    Arc::new(g)
}

fn reference(q: &[f32], k: &[f32], v: &[f32]) -> Vec<f32> {
    let mut o = vec![0f32; HEADS * T * DV];
    for h in 0..HEADS {
        let kv = h / GROUP;
        for t in 0..T {
            let scores: Vec<f64> = (0..N)
                .map(|n| (0..K).map(|i| f64::from(q[(h * T + t) * K + i]) * f64::from(k[(kv * N + n) * K + i])).sum())
                .collect();
            for j in 0..DV {
                let sum: f64 = (0..N).map(|n| scores[n] * f64::from(v[(kv * DV + j) * N + n])).sum();
                o[(h * T + t) * DV + j] = sum as f32;
            }
        }
    }
    o
}

/// Per device its query heads (in proportion to `shares`) and the key heads
/// of their groups.
fn splits(devices: usize, shares: &[f32]) -> (TensorSplit, TensorSplit) {
    let heads = TensorSplit::proportional(0, HEADS, devices, shares, 1).expect("heads");
    let TensorSplit::Split { parts, .. } = &heads else { unreachable!("proportional splits") };
    let kv: Vec<Vec<Range<usize>>> =
        parts.iter().map(|p| std::iter::once(p[0].start / GROUP..p[0].end.div_ceil(GROUP)).collect()).collect();
    (heads.clone(), TensorSplit::Split { axis: 0, parts: kv })
}

fn compute(devices: usize, shares: &[f32], policy: WaitPolicy) {
    let names: Vec<String> = (0..devices).map(|i| format!("cpu:{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let inner = baton_cpu::open_with(&names, &baton_cpu::OpenOptions::default().with_policy(policy)).expect("cpus");
    let device = CompositeDevice::new(inner, policy).expect("composite");
    let (heads, kv) = splits(devices, shares);
    let s = device.new_stream().expect("stream");
    let tensor = |dims: &[usize], split: TensorSplit| device.alloc_split(DType::F32, dims, split).expect("alloc");
    let q = tensor(&[HEADS, T, K], heads);
    let k = tensor(&[KV, N, K], kv.clone());
    let v = tensor(&[KV, DV, N], kv);
    let o = tensor(&[HEADS, T, DV], TensorSplit::Mirror);
    let (qv, kv_, vv) = (random(HEADS * T * K, 1), random(KV * N * K, 2), random(KV * DV * N, 3));
    drop(s.write_async(&q, qv.clone()).expect("write q"));
    drop(s.write_async(&k, kv_.clone()).expect("write k"));
    drop(s.write_async(&v, vv.clone()).expect("write v"));
    let g = graph();
    let mut b = Bindings::new(&g);
    for (name, t) in [("q", &q), ("k", &k), ("v", &v), ("o", &o)] {
        b.bind_name(name, t.clone()).expect("bind");
    }
    s.compute(b).expect("compute");
    let got = s.read_into_async(&o, vec![0f32; HEADS * T * DV]).expect("read").wait().expect("done");
    let want = reference(&qv, &kv_, &vv);
    let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(worst < 1e-5, "{devices} devices, shares {shares:?}: largest error {worst}");
    assert_eq!(device.inner_implicit_waits(), 0, "{:?}", device.inner_hazard_reports());
}

#[test]
fn heads_split_inside_a_group_give_the_grouped_product() {
    let poll = WaitPolicy::Poll { bound: Duration::from_secs(30) };
    for policy in [WaitPolicy::Block, poll] {
        // 5|4 and 3|3|3... and 5|2|2: groups split, and whole.
        for (devices, shares) in [(2, &[][..]), (2, &[1.0, 2.0][..]), (3, &[][..]), (3, &[2.0, 1.0, 1.0][..])] {
            compute(devices, shares, policy);
        }
    }
}

#[test]
fn a_split_group_needs_no_gate_before_the_output() {
    let g = graph();
    let (heads, kv) = splits(2, &[]);
    let TensorSplit::Split { parts, .. } = &kv else { unreachable!("split") };
    let ranges: Vec<Range<usize>> = parts.iter().map(|p| p[0].clone()).collect();
    assert_eq!(ranges, [0..2, 1..3], "the middle group's key head is on both devices");
    let mut bound = vec![None; g.nodes().len()];
    bound[g.find("q").expect("q").0] = Some(heads);
    bound[g.find("k").expect("k").0] = Some(kv.clone());
    bound[g.find("v").expect("v").0] = Some(kv);
    let collective = baton_composite::Butterfly::new();
    let p = Partition::build(&g, bound, 2, &collective).expect("partition");
    let gates: Vec<_> = p.gates().collect();
    assert_eq!((p.segments(), gates.len()), (1, 1), "one segment, then the output's gather");
    assert!(matches!(gates[0].spec.kind, GateKind::AllGather { .. }));
}

#[test]
fn a_device_holding_an_index_twice_is_rejected() {
    // Per device, (start, end) of each segment.
    let parts = |p: &[&[(usize, usize)]]| p.iter().map(|s| s.iter().map(|&(a, b)| a..b).collect()).collect();
    let twice = TensorSplit::Split { axis: 0, parts: parts(&[&[(0, 2), (1, 3)], &[(0, 1)]]) };
    assert!(twice.check(DType::F32, &[KV, N, K], 2).is_err());
    let shared = TensorSplit::Split { axis: 0, parts: parts(&[&[(0, 2)], &[(1, 3)]]) };
    assert!(shared.check(DType::F32, &[KV, N, K], 2).is_ok());
    let gap = TensorSplit::Split { axis: 0, parts: parts(&[&[(0, 1)], &[(2, 3)]]) };
    assert!(gap.check(DType::F32, &[KV, N, K], 2).is_err());
}

#[test]
fn overlapping_inner_parts_are_never_summed() {
    // y = (x · w1ᵀ) · w2ᵀ with w1's rows (so h's columns) and w2's columns
    // held with an overlap: partial sums would add indices 4..6 twice.
    let mut g = Graph::new();
    let x = g.leaf("x", DType::F32, &[2, 8], Flags::INPUT).expect("x");
    let w1 = g.leaf("w1", DType::F32, &[10, 8], Flags::WEIGHT).expect("w1");
    let w2 = g.leaf("w2", DType::F32, &[8, 10], Flags::WEIGHT).expect("w2");
    let h = g.matmul(x, w1).expect("h");
    let y = g.matmul(h, w2).expect("y");
    g.mark(y, Flags::OUTPUT).expect("mark");
    let overlapping: Vec<Vec<Range<usize>>> =
        [(0, 6), (4, 10)].iter().map(|&(a, b)| std::iter::once(a..b).collect()).collect();
    assert!(!TensorSplit::disjoint(&overlapping));
    let mut bound = vec![None; g.nodes().len()];
    bound[w1.0] = Some(TensorSplit::Split { axis: 0, parts: overlapping.clone() });
    bound[w2.0] = Some(TensorSplit::Split { axis: 1, parts: overlapping });
    let p = Partition::build(&g, bound, 2, &baton_composite::Butterfly::new()).expect("partition");
    assert!(p.gates().all(|gate| gate.spec.kind != GateKind::AllReduce), "no partial sums over replicas");
    assert_ne!(p.states[y.0], TensorSplit::Partial);
}
