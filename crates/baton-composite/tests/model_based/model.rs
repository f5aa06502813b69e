//! The plain sequential model of the contract: what each queued item's point
//! must become (reached, failed with which first cause, or still pending),
//! and what every byte must hold.
//!
//! Fates follow the rules: a stream runs its items in order (`Q-FIFO`); a
//! failed item fails every later one with the same first cause
//! (`E-STICKY`); a wait fails with the point's first cause (`W-FAIL`), with
//! a new cause carrying its text when relayed (`W-FOREIGN`), and a bounded
//! wait on a point that never comes, or a wait with a short deadline on a
//! silent peer, fails `TimedOut` (`W-BOUND`); host timelines follow
//! `H-RELEASE`/`H-ABANDON`. Bytes: conflicting accesses are ordered in
//! submission order (`M-ORDER`), so the memory is what applying every
//! reached item in submission order gives.

use std::collections::HashMap;

/// A point the model knows.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// Item `item` of model stream `stream`.
    Stream { stream: usize, item: usize },
    /// Value `value` of host timeline `host`.
    Host { host: usize, value: u64 },
    /// A point held until the case's checks are done.
    Never,
}

/// A first cause, named by where it must come from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Cause {
    /// A release dropped (`abandoned`) or failed.
    Host { host: usize, value: u64, abandoned: bool },
    /// A host function that returned `Err`.
    HostFn { stream: usize, item: usize },
    /// A bounded native wait that ran out.
    TimedOut { stream: usize, item: usize },
    /// A relayed wait that failed (the relay's own cause, with the text of
    /// the point's cause or of its timeout).
    Relay { stream: usize, item: usize },
}

/// What a point is or will be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    Reached,
    Failed(Cause),
    Pending,
}

/// Bytes at an offset of a model buffer (by buffer uid).
#[derive(Clone, Copy, Debug)]
pub struct Place {
    pub buffer: usize,
    pub offset: usize,
}

/// What an item does to memory.
#[derive(Clone, Debug)]
pub enum Effect {
    Write {
        dst: Place,
        bytes: Vec<u8>,
    },
    /// Captures the bytes into read `read` of the model.
    Read {
        src: Place,
        len: usize,
        read: usize,
    },
    Copy {
        src: Place,
        dst: Place,
        len: usize,
    },
    Scale {
        x: Place,
        y: Place,
        elems: usize,
        factor: f32,
    },
    Add {
        a: Place,
        b: Place,
        out: Place,
        elems: usize,
    },
}

/// One queued item.
#[derive(Clone, Debug)]
pub enum Item {
    Wait {
        target: Target,
        bounded: bool,
        /// A short deadline on a target that stays pending past it (the
        /// driver queues one only there): the wait fails `TimedOut`, or
        /// its relay fails, whatever the target becomes later.
        expires: bool,
        relayed: bool,
        /// One of the hazard tracking's own waits (`WaitUntil::Settled`):
        /// it ends when its target settles, failed or not, and a failed
        /// target does not fail the stream (M-ORDER).
        settles: bool,
    },
    HostOk,
    HostErr,
    /// Blocked until silent gate `gate` is opened.
    Silent {
        gate: usize,
    },
    Mem {
        effect: Effect,
        seq: u64,
    },
}

#[derive(Default)]
pub struct HostModel {
    reserved: u64,
    /// Signals and failures in the order they happened.
    events: Vec<(u64, Option<Cause>)>,
}

impl HostModel {
    pub fn reserve(&mut self) -> u64 {
        self.reserved += 1;
        self.reserved
    }

    /// The counter and the failures (value, cause) in time order.
    fn state(&self) -> (u64, Vec<(u64, Cause)>) {
        let mut reached = 0;
        let mut failures: Vec<(u64, Cause)> = Vec::new();
        for (value, event) in &self.events {
            match event {
                None => {
                    if failures.iter().all(|(w, _)| *w > *value) {
                        reached = reached.max(*value);
                    }
                }
                Some(cause) => {
                    if *value > reached {
                        failures.push((*value, cause.clone()));
                    }
                }
            }
        }
        (reached, failures)
    }

    pub fn fate(&self, value: u64) -> Fate {
        let (reached, failures) = self.state();
        if value <= reached {
            return Fate::Reached;
        }
        match failures.into_iter().find(|(w, _)| *w <= value) {
            Some((_, cause)) => Fate::Failed(cause),
            None => Fate::Pending,
        }
    }

    pub fn signal(&mut self, value: u64) {
        self.events.push((value, None));
    }

    pub fn fail(&mut self, value: u64, cause: Cause) {
        self.events.push((value, Some(cause)));
    }
}

#[derive(Default)]
pub struct Model {
    /// Items of every stream ever made, by stream uid.
    pub streams: Vec<Vec<Item>>,
    pub hosts: Vec<HostModel>,
    /// Whether each silent gate has been opened.
    pub gates: Vec<bool>,
    /// Length of every buffer ever allocated, by buffer uid.
    pub buffers: Vec<usize>,
    /// Number of reads (`Effect::Read::read` indexes them).
    pub reads: usize,
    next_seq: u64,
}

impl Model {
    pub fn new_stream(&mut self) -> usize {
        self.streams.push(Vec::new());
        self.streams.len() - 1
    }

    pub fn new_buffer(&mut self, len: usize) -> usize {
        self.buffers.push(len);
        self.buffers.len() - 1
    }

    pub fn new_gate(&mut self) -> usize {
        self.gates.push(false);
        self.gates.len() - 1
    }

    pub fn new_read(&mut self) -> usize {
        self.reads += 1;
        self.reads - 1
    }

    /// Queues `item` on `stream`; returns its index.
    pub fn push(&mut self, stream: usize, item: Item) -> usize {
        self.streams[stream].push(item);
        self.streams[stream].len() - 1
    }

    pub fn push_mem(&mut self, stream: usize, effect: Effect) -> usize {
        self.next_seq += 1;
        let seq = self.next_seq;
        self.push(stream, Item::Mem { effect, seq })
    }

    /// The fate of every item of every stream, as far as what happened so
    /// far decides it (a gate not yet opened or a release not yet ended
    /// keeps what depends on it pending).
    pub fn fates(&self) -> Vec<Vec<Fate>> {
        let mut fates: Vec<Vec<Fate>> = self.streams.iter().map(|items| Vec::with_capacity(items.len())).collect();
        // A wait's target was queued before the wait, so computing items in
        // submission order (stream by stream, then revisiting) converges:
        // iterate until every stream is complete.
        let mut done = vec![0usize; self.streams.len()];
        loop {
            let mut progressed = false;
            for s in 0..self.streams.len() {
                while done[s] < self.streams[s].len() {
                    let i = done[s];
                    let Some(fate) = self.item_fate(&fates, s, i) else { break };
                    fates[s].push(fate);
                    done[s] += 1;
                    progressed = true;
                }
            }
            if !progressed {
                break;
            }
        }
        assert!(
            done.iter().zip(&self.streams).all(|(d, items)| *d == items.len()),
            "model: a wait targets an item queued after it"
        );
        fates
    }

    fn target_fate(&self, fates: &[Vec<Fate>], target: &Target) -> Option<Fate> {
        match target {
            Target::Stream { stream, item } => fates[*stream].get(*item).cloned(),
            Target::Host { host, value } => Some(self.hosts[*host].fate(*value)),
            Target::Never => Some(Fate::Pending),
        }
    }

    /// `None` when a target's fate is not computed yet.
    fn item_fate(&self, fates: &[Vec<Fate>], s: usize, i: usize) -> Option<Fate> {
        if i > 0 {
            match &fates[s][i - 1] {
                Fate::Reached => {}
                other => return Some(other.clone()),
            }
        }
        Some(match &self.streams[s][i] {
            Item::Wait { expires: true, relayed, .. } => Fate::Failed(if *relayed {
                Cause::Relay { stream: s, item: i }
            } else {
                Cause::TimedOut { stream: s, item: i }
            }),
            Item::Wait { target, bounded, relayed, settles, .. } => match (self.target_fate(fates, target)?, relayed) {
                (Fate::Reached, _) => Fate::Reached,
                (Fate::Failed(_), _) if *settles => Fate::Reached,
                (Fate::Failed(_), true) => Fate::Failed(Cause::Relay { stream: s, item: i }),
                (Fate::Failed(cause), false) => Fate::Failed(cause),
                (Fate::Pending, _) if !bounded => Fate::Pending,
                (Fate::Pending, true) => Fate::Failed(Cause::Relay { stream: s, item: i }),
                (Fate::Pending, false) => Fate::Failed(Cause::TimedOut { stream: s, item: i }),
            },
            Item::HostOk | Item::Mem { .. } => Fate::Reached,
            Item::HostErr => Fate::Failed(Cause::HostFn { stream: s, item: i }),
            Item::Silent { gate } => {
                if self.gates[*gate] {
                    Fate::Reached
                } else {
                    Fate::Pending
                }
            }
        })
    }

    /// Whether `target` stays pending until the silent gates open at the
    /// end of the case, whatever happens before: the first item up to it
    /// on its stream that is not reached is a closed silent gate, or an
    /// unbounded wait on such a target (a release could still end, a bound
    /// run out).
    pub fn silent(&self, fates: &[Vec<Fate>], target: &Target) -> bool {
        match target {
            Target::Never => true,
            Target::Host { .. } => false,
            Target::Stream { stream, item } => {
                let Some(first) = (0..=*item).find(|&j| fates[*stream][j] != Fate::Reached) else { return false };
                if fates[*stream][first] != Fate::Pending {
                    return false;
                }
                match &self.streams[*stream][first] {
                    Item::Silent { gate } => !self.gates[*gate],
                    Item::Wait { target, bounded: false, expires: false, .. } => self.silent(fates, target),
                    _ => false,
                }
            }
        }
    }

    /// Applies every reached memory item in submission order. Returns the
    /// bytes of every buffer and the bytes every read must see.
    pub fn memory(&self, fates: &[Vec<Fate>]) -> (Vec<Vec<u8>>, HashMap<usize, Vec<u8>>) {
        let mut mem: Vec<Vec<u8>> = self.buffers.iter().map(|&len| vec![0u8; len]).collect();
        let mut items: Vec<(u64, &Effect)> = Vec::new();
        for (s, stream) in self.streams.iter().enumerate() {
            for (i, item) in stream.iter().enumerate() {
                if let (Item::Mem { effect, seq }, Fate::Reached) = (item, &fates[s][i]) {
                    items.push((*seq, effect));
                }
            }
        }
        items.sort_by_key(|(seq, _)| *seq);
        let mut reads = HashMap::new();
        for (_, effect) in items {
            apply(&mut mem, effect, &mut reads);
        }
        (mem, reads)
    }
}

fn get(mem: &[Vec<u8>], at: Place, len: usize) -> Vec<u8> {
    mem[at.buffer][at.offset..at.offset + len].to_vec()
}

fn put(mem: &mut [Vec<u8>], at: Place, bytes: &[u8]) {
    mem[at.buffer][at.offset..at.offset + bytes.len()].copy_from_slice(bytes);
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn float_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

fn apply(mem: &mut [Vec<u8>], effect: &Effect, reads: &mut HashMap<usize, Vec<u8>>) {
    match effect {
        Effect::Write { dst, bytes } => put(mem, *dst, bytes),
        Effect::Read { src, len, read } => {
            reads.insert(*read, get(mem, *src, *len));
        }
        Effect::Copy { src, dst, len } => {
            let bytes = get(mem, *src, *len);
            put(mem, *dst, &bytes);
        }
        Effect::Scale { x, y, elems, factor } => {
            let out: Vec<f32> = floats(&get(mem, *x, elems * 4)).iter().map(|v| v * factor).collect();
            put(mem, *y, &float_bytes(&out));
        }
        Effect::Add { a, b, out, elems } => {
            let (a, b) = (floats(&get(mem, *a, elems * 4)), floats(&get(mem, *b, elems * 4)));
            let sum: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
            put(mem, *out, &float_bytes(&sum));
        }
    }
}
