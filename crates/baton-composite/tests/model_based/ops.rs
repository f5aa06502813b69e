//! What a case is made of: the devices under test and a sequence of calls of
//! the safe API, generated (with some invalid calls) and shrunk by proptest.
//!
//! Every index in an op (stream, buffer, release, pending) is taken modulo
//! what exists when the op runs, so any shrunk sequence still runs.

use proptest::prelude::*;

/// f32 elements in the payload of every buffer.
pub const PAYLOAD: usize = 16;
/// Guard bytes on each side of the payload; never touched by valid calls.
pub const GUARD: usize = 16;
/// Bytes of every buffer.
pub const BUFFER_BYTES: usize = GUARD + PAYLOAD * 4 + GUARD;
/// Stream slots of a case.
pub const STREAMS: usize = 3;
/// Buffer slots of a case.
pub const BUFFERS: usize = 4;
/// Host timelines of a case.
pub const HOSTS: usize = 2;

/// The devices under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setup {
    /// `cpu:0`, `cpu:1` (and `cpu:0` again as a third device).
    Cpu { three: bool },
    /// The CPU devices wrapped in `ChaosDevice`.
    Chaos { three: bool, seed: u64, native_waits: bool, foreign_access: bool },
    /// A composite over `cpu:0,cpu:1`, then `cpu:0` and `cpu:1` themselves.
    Composite,
}

/// A tensor of f32 elements inside a buffer's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    pub buffer: usize,
    /// First element (inside the payload).
    pub start: usize,
    /// Elements (at least 1; `start + len <= PAYLOAD`).
    pub len: usize,
}

impl View {
    /// Byte offset in the buffer.
    pub fn offset(&self) -> usize {
        GUARD + self.start * 4
    }
    pub fn bytes(&self) -> usize {
        self.len * 4
    }
}

/// What a host function does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostFnKind {
    Ok,
    /// Returns `Err`: the stream fails (`E-STICKY`).
    Err,
    /// Blocks on a channel until the end of the case: the stream goes silent.
    Silent,
}

/// How a release ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseEnd {
    Signal,
    Drop,
    Fail,
    /// `Release::fail_with` the first cause of a failed point of the case
    /// (the `n`-th, when there is one; else `fail`).
    FailWith(usize),
}

/// How a stream wait gets its short deadline (`W-BOUND`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    /// `Stream::wait_bounded`: this edge's own deadline.
    Edge,
    /// `Stream::with_deadline` on a clone, then `wait`.
    Stream,
    /// `Stream::with_deadline` on a clone, then `wait_or_relay` (the relay
    /// waits with the stream's deadline too).
    StreamRelay,
}

/// One call (or a few calls that belong together) of the safe API.
#[derive(Clone, Debug)]
pub enum Op {
    /// Drops the buffer handle of the slot and allocates a new one.
    Realloc { buffer: usize },
    /// `write_async`; `wrong_len` passes a host buffer one element too long.
    Write { stream: usize, dst: View, seed: u64, wrong_len: bool },
    /// `write_range_async` at any byte offset; `past_end` asks
    /// `Buffer::range` for bytes past the buffer (refused, never written).
    WriteRange { stream: usize, buffer: usize, offset: usize, len: usize, seed: u64, past_end: bool },
    /// `read_into_async` (f32) or `read_async` (bytes).
    Read { stream: usize, src: View, into: bool },
    /// `copy` (same or another device), with the producer's point or none.
    Copy { stream: usize, src: View, dst: View, with_producer: bool },
    /// `copy_staged` through host memory, read by `src_stream`.
    CopyStaged { stream: usize, src_stream: usize, src: View, dst: View },
    /// `y = x * factor` (output overlapping the input is refused).
    Scale { stream: usize, x: View, y: View, factor: f32 },
    /// `out = a + b` (the same length; `b` takes `a`'s length).
    Add { stream: usize, a: View, b: View, out: View },
    /// `stream.wait` on another stream's last point; `relay` uses
    /// `wait_or_relay`; `bounded` uses a poll policy with a long bound.
    WaitStream { stream: usize, on: usize, relay: bool, bounded: bool },
    /// `stream.wait` on a reserved release's point.
    WaitRelease { stream: usize, release: usize, relay: bool, bounded: bool },
    /// A bounded stream wait (short poll bound) on a point that is held
    /// until the case's checks are done: the stream fails `TimedOut`.
    WaitNever { stream: usize, relay: bool },
    /// A stream wait with a short deadline on a silent peer: the point held
    /// until the checks are done (`never`, or when no stream is silent),
    /// or the last point of a stream that stays pending until the case
    /// ends (the `on`-th such). It fails `TimedOut` naming the point.
    WaitSilent { stream: usize, on: usize, never: bool, deadline: Deadline },
    /// `HostTimeline::reserve`.
    Reserve { host: usize },
    /// Signals, drops or fails a reserved release.
    EndRelease { release: usize, end: ReleaseEnd },
    /// `host_fn`.
    HostFn { stream: usize, kind: HostFnKind },
    /// `wait_timeout` on a stream's last point from the host.
    HostWait { stream: usize },
    /// `Pending::wait_timeout`, then `Pending::wait` once settled.
    PendingWait { pending: usize },
    /// `Pending::wait_within`: a transfer still gated times out and comes
    /// back whole through `PendingError::into_pending`, still queued (with
    /// `again`, waited on once more at once); a settled one returns.
    PendingWithin { pending: usize, again: bool },
    /// Drops the stream handle of the slot, its last (queued work still
    /// runs); the slot gets a new stream. `busy` picks a slot whose stream
    /// has work still gated, if there is one.
    DropStream { stream: usize, busy: bool },
}

/// A case: devices, a sequence, and how remaining releases end.
#[derive(Clone, Debug)]
pub struct Case {
    pub setup: Setup,
    pub ops: Vec<Op>,
    /// Releases still held at the end are signalled (else dropped).
    pub signal_at_end: bool,
}

/// The setups of a kind (`cpu`, `chaos`, `composite`), or of every kind.
fn setup(kind: Option<&str>) -> BoxedStrategy<Setup> {
    let cpu = any::<bool>().prop_map(|three| Setup::Cpu { three });
    let chaos = (any::<bool>(), any::<u64>(), any::<bool>(), any::<bool>()).prop_map(
        |(three, seed, native_waits, foreign_access)| Setup::Chaos { three, seed, native_waits, foreign_access },
    );
    match kind {
        Some("cpu") => cpu.boxed(),
        Some("chaos") => chaos.boxed(),
        Some("composite") => Just(Setup::Composite).boxed(),
        None => prop_oneof![cpu, chaos, Just(Setup::Composite)].boxed(),
        Some(other) => panic!("BATON_MODEL_SETUP={other}: expected cpu, chaos or composite"),
    }
}

fn view() -> impl Strategy<Value = View> {
    (0..BUFFERS, 0..PAYLOAD, 1..=PAYLOAD).prop_map(|(buffer, start, len)| {
        let len = len.min(PAYLOAD - start);
        View { buffer, start, len }
    })
}

fn release_end() -> impl Strategy<Value = ReleaseEnd> {
    prop_oneof![
        Just(ReleaseEnd::Signal),
        Just(ReleaseEnd::Drop),
        Just(ReleaseEnd::Fail),
        (0..8usize).prop_map(ReleaseEnd::FailWith),
    ]
}

fn deadline() -> impl Strategy<Value = Deadline> {
    prop_oneof![Just(Deadline::Edge), Just(Deadline::Stream), Just(Deadline::StreamRelay)]
}

fn host_fn_kind() -> impl Strategy<Value = HostFnKind> {
    prop_oneof![6 => Just(HostFnKind::Ok), 2 => Just(HostFnKind::Err), 1 => Just(HostFnKind::Silent)]
}

fn op() -> impl Strategy<Value = Op> {
    let s = || 0..STREAMS;
    prop_oneof![
        1 => (0..BUFFERS).prop_map(|buffer| Op::Realloc { buffer }),
        6 => (s(), view(), any::<u64>(), prop::bool::weighted(0.05))
            .prop_map(|(stream, dst, seed, wrong_len)| Op::Write { stream, dst, seed, wrong_len }),
        3 => (s(), 0..BUFFERS, 0..PAYLOAD * 4, 1..=PAYLOAD * 4, any::<u64>(), prop::bool::weighted(0.05)).prop_map(
            |(stream, buffer, offset, len, seed, past_end)| {
                let len = len.min(PAYLOAD * 4 - offset);
                Op::WriteRange { stream, buffer, offset, len, seed, past_end }
            }
        ),
        5 => (s(), view(), any::<bool>()).prop_map(|(stream, src, into)| Op::Read { stream, src, into }),
        4 => (s(), view(), view(), any::<bool>()).prop_map(|(stream, src, mut dst, with_producer)| {
            dst.len = src.len.min(PAYLOAD - dst.start);
            Op::Copy { stream, src, dst, with_producer }
        }),
        2 => (s(), s(), view(), view()).prop_map(|(stream, src_stream, src, mut dst)| {
            dst.len = src.len.min(PAYLOAD - dst.start);
            Op::CopyStaged { stream, src_stream, src, dst }
        }),
        3 => (s(), view(), view(), prop::sample::select(vec![2.0f32, 0.5, -1.0, 3.0])).prop_map(
            |(stream, x, mut y, factor)| {
                y.start = y.start.min(PAYLOAD - x.len);
                y.len = x.len;
                Op::Scale { stream, x, y, factor }
            }
        ),
        2 => (s(), view(), view(), view()).prop_map(|(stream, a, mut b, mut out)| {
            b.start = b.start.min(PAYLOAD - a.len);
            out.start = out.start.min(PAYLOAD - a.len);
            b.len = a.len;
            out.len = a.len;
            Op::Add { stream, a, b, out }
        }),
        4 => (s(), s(), any::<bool>(), prop::bool::weighted(0.2))
            .prop_map(|(stream, on, relay, bounded)| Op::WaitStream { stream, on, relay, bounded }),
        4 => (s(), 0..8usize, any::<bool>(), prop::bool::weighted(0.2))
            .prop_map(|(stream, release, relay, bounded)| Op::WaitRelease { stream, release, relay, bounded }),
        1 => (s(), any::<bool>()).prop_map(|(stream, relay)| Op::WaitNever { stream, relay }),
        2 => (s(), 0..STREAMS, prop::bool::weighted(0.3), deadline())
            .prop_map(|(stream, on, never, deadline)| Op::WaitSilent { stream, on, never, deadline }),
        4 => (0..HOSTS).prop_map(|host| Op::Reserve { host }),
        4 => (0..8usize, release_end()).prop_map(|(release, end)| Op::EndRelease { release, end }),
        3 => (s(), host_fn_kind()).prop_map(|(stream, kind)| Op::HostFn { stream, kind }),
        2 => s().prop_map(|stream| Op::HostWait { stream }),
        2 => (0..8usize).prop_map(|pending| Op::PendingWait { pending }),
        2 => (0..8usize, any::<bool>()).prop_map(|(pending, again)| Op::PendingWithin { pending, again }),
        2 => (s(), any::<bool>()).prop_map(|(stream, busy)| Op::DropStream { stream, busy }),
    ]
}

/// Cases of up to `max_ops` calls, on setups of `kind` (every kind if
/// `None`).
pub fn case(max_ops: usize, kind: Option<&str>) -> impl Strategy<Value = Case> {
    (setup(kind), prop::collection::vec(op(), 1..=max_ops), any::<bool>())
        .prop_map(|(setup, ops, signal_at_end)| Case { setup, ops, signal_at_end })
}

/// Host data of `bytes` bytes for a seed. Every byte is below 0x40, so any
/// f32 word spliced from these bytes and computed values is finite (the
/// model compares computed bytes exactly).
pub fn data(bytes: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..bytes)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 56) as u8 & 0x3f
        })
        .collect()
}
