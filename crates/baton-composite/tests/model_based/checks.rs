//! The checks: points against the model's fates (with their first causes),
//! host buffers coming back, and every byte of every buffer, guards
//! included. Every wait is bounded; a point that does not settle in time is
//! reported as a hang, by name.

use std::sync::atomic::Ordering;
use std::time::Instant;

use baton_composite::CompositeBuffer;
use baton_core::backend::{Buffer, StreamError};
use baton_core::sync::{Failure, FailureKind, PointStatus, SyncPoint, WaitError};

use crate::driver::{point_of, wait_within, Lent, Returned, Run, Within, SETTLE, SHORT};
use crate::model::{Cause, Fate, Target};
use crate::ops::{ReleaseEnd, STREAMS};
use crate::{CALLS, PENDING_TIMEOUTS};

fn expected_kind(cause: &Cause) -> (FailureKind, String) {
    match cause {
        Cause::Host { abandoned: true, .. } => (FailureKind::Abandoned, String::new()),
        Cause::Host { host, value, abandoned: false } => (FailureKind::WorkFailed, format!("fail-{host}-{value}")),
        Cause::HostFn { stream, item } => (FailureKind::WorkFailed, format!("boom-{stream}-{item}")),
        Cause::TimedOut { .. } => (FailureKind::TimedOut, String::new()),
        Cause::Relay { .. } => (FailureKind::WorkFailed, "relayed wait".into()),
    }
}

impl Run {
    /// The failure seen for a point whose model cause is `expected`: the
    /// same first cause as every other point of that cause (`P-FAIL`,
    /// `W-FAIL`), of the right kind and message.
    pub fn check_cause(&mut self, what: &str, expected: &Cause, actual: &Failure) {
        if let Some((_, first)) = self.causes.iter().find(|(c, _)| c == expected) {
            if !first.same_cause(actual) {
                let first = first.clone();
                self.problems.push(format!("{what}: failed with {actual}, not the first cause {first} ({expected:?})"));
            }
            return;
        }
        let (kind, mut message) = expected_kind(expected);
        if let Some(point) = self.awaited.get(expected) {
            message = point.clone(); // a timeout names the point (W-BOUND)
        }
        if actual.kind() != kind || !actual.message().contains(&message) {
            self.problems
                .push(format!("{what}: failed with {actual}, expected {kind:?} containing {message:?} ({expected:?})"));
        }
        self.causes.push((expected.clone(), actual.clone()));
    }

    /// Waits for `point` (until `deadline`) and checks it against `fate`.
    pub fn check_point(&mut self, what: &str, point: &SyncPoint, fate: &Fate, deadline: Instant) {
        CALLS.fetch_add(1, Ordering::Relaxed);
        let result = match fate {
            Fate::Pending => {
                if !matches!(point.status(), PointStatus::Pending) {
                    self.problems.push(format!("{what} ({point}): {:?}, expected pending", point.status()));
                }
                return;
            }
            _ => point.wait_timeout(deadline.saturating_duration_since(Instant::now()).max(SHORT)),
        };
        match (result, fate) {
            (Ok(()), Fate::Reached) => {}
            (Err(WaitError::Failed { cause, .. }), Fate::Failed(expected)) => self.check_cause(what, expected, &cause),
            (Err(WaitError::Timeout { .. }), _) => self
                .problems
                .push(format!("hang: {what} ({point}) did not settle within {SETTLE:?}, expected {fate:?}")),
            (got, _) => self.problems.push(format!("{what} ({point}): {got:?}, expected {fate:?}")),
        }
    }

    /// `HostWait`: a bounded host wait on a stream's last point.
    pub fn host_wait(&mut self, stream: usize) {
        let uid = self.streams[stream % STREAMS].uid;
        let Some(Some(point)) = self.points[uid].last().cloned() else {
            self.skipped += 1;
            return;
        };
        let fate = self.model.fates()[uid].last().cloned().expect("an item");
        if fate == Fate::Pending {
            CALLS.fetch_add(1, Ordering::Relaxed);
            match point.wait_timeout(SHORT) {
                Err(WaitError::Timeout { waited, .. }) if waited >= SHORT => {}
                other => self.problems.push(format!("wait_timeout on pending {point}: {other:?} (P-TIMEOUT)")),
            }
        } else {
            self.check_point("host wait", &point, &fate, Instant::now() + SETTLE);
        }
    }

    /// `PendingWait`: `Pending::wait_timeout`, then `wait` once settled.
    pub fn pending_wait(&mut self, pending: usize) {
        let open: Vec<usize> = (0..self.lent.len()).filter(|&i| self.lent[i].lent.is_some()).collect();
        if open.is_empty() {
            self.skipped += 1;
            return;
        }
        let index = open[pending % open.len()];
        let fate = self.fate_of(&self.lent[index].target.clone());
        let lent = self.lent[index].lent.take().expect("open");
        let bound = if fate == Fate::Pending { SHORT } else { SETTLE };
        CALLS.fetch_add(1, Ordering::Relaxed);
        let result = match &lent {
            Lent::WriteF32(p, _) | Lent::ReadF32(p, _) => p.wait_timeout(bound),
            Lent::WriteBytes(p, _) | Lent::ReadBytes(p, _) => p.wait_timeout(bound),
        };
        match (result, &fate) {
            (Err(StreamError::Wait(WaitError::Timeout { .. })), Fate::Pending) => {
                self.lent[index].lent = Some(lent); // still lent: P-TIMEOUT leaves it alone
            }
            (Err(StreamError::Wait(WaitError::Timeout { .. })), _) => {
                self.problems.push(format!("hang: Pending::wait_timeout on {} expected {fate:?}", point_of(&lent)));
                self.lent[index].lent = Some(lent);
            }
            (_, Fate::Pending) => {
                self.problems.push(format!("Pending::wait_timeout on {}: settled, expected pending", point_of(&lent)));
                self.take_back(index, lent);
            }
            _ => self.take_back(index, lent),
        }
    }

    /// Takes the buffer of a settled transfer back (`Pending::wait_within`).
    fn take_back(&mut self, index: usize, lent: Lent) {
        let point = point_of(&lent).clone();
        match wait_within(lent, SETTLE) {
            Within::Settled(returned) => self.lent[index].returned = Some(returned),
            Within::TimedOut(lent) => {
                self.problems.push(format!("hang: Pending::wait_within on settled {point} timed out"));
                self.lent[index].lent = Some(lent);
            }
            Within::Lost(e) => self.problems.push(format!("Pending::wait_within on {point}: {e}, transfer lost")),
        }
    }

    /// `PendingWithin`: `Pending::wait_within`. A transfer the model holds
    /// pending times out and comes back whole, still queued (`P-TIMEOUT`,
    /// `H-OWN`): it runs later and its buffer comes back at the end (checked
    /// there); a settled one returns its buffer.
    pub fn pending_within(&mut self, pending: usize, again: bool) {
        let open: Vec<usize> = (0..self.lent.len()).filter(|&i| self.lent[i].lent.is_some()).collect();
        if open.is_empty() {
            self.skipped += 1;
            return;
        }
        // A gated transfer if there is one: the case a timeout is about.
        let gated: Vec<usize> =
            open.iter().copied().filter(|&i| self.fate_of(&self.lent[i].target) == Fate::Pending).collect();
        let index = if gated.is_empty() { open[pending % open.len()] } else { gated[pending % gated.len()] };
        let fate = self.fate_of(&self.lent[index].target.clone());
        let lent = self.lent[index].lent.take().expect("open");
        if fate != Fate::Pending {
            return self.take_back(index, lent);
        }
        let point = point_of(&lent).clone();
        let mut lent = Some(lent);
        for _ in 0..if again { 2 } else { 1 } {
            match wait_within(lent.take().expect("lent"), SHORT) {
                Within::TimedOut(back) => {
                    PENDING_TIMEOUTS.fetch_add(1, Ordering::Relaxed);
                    lent = Some(back);
                }
                Within::Settled(returned) => {
                    self.problems.push(format!("Pending::wait_within on {point}: settled, expected pending"));
                    self.lent[index].returned = Some(returned);
                    return;
                }
                Within::Lost(e) => {
                    self.problems.push(format!(
                        "Pending::wait_within on {point}: {e} and the transfer did not come back (P-TIMEOUT, H-OWN)"
                    ));
                    return;
                }
            }
        }
        self.lent[index].lent = lent;
    }

    fn fate_of(&self, target: &Target) -> Fate {
        match target {
            Target::Stream { stream, item } => self.model.fates()[*stream][*item].clone(),
            Target::Host { host, value } => self.model.hosts[*host].fate(*value),
            Target::Never => Fate::Pending,
        }
    }

    /// Ends the case: every release still held is signalled (or dropped),
    /// every silent peer is let go, then everything must settle as the
    /// model says, every host buffer come back, every byte be right.
    pub fn finish(&mut self, signal_at_end: bool) {
        let end = if signal_at_end { ReleaseEnd::Signal } else { ReleaseEnd::Drop };
        for i in 0..self.releases.len() {
            if self.releases[i].release.is_some() {
                self.end(i, end);
            }
        }
        // Deadline waits on silent streams end before the gates open (those
        // streams stay silent until then).
        let fates = self.model.fates();
        let deadline = Instant::now() + SETTLE;
        for (uid, item) in self.expiring.clone() {
            let point = self.points[uid][item].clone().expect("a deadline wait has a point");
            self.check_point(&format!("deadline wait {uid}/{item}"), &point, &fates[uid][item], deadline);
        }
        for (gate, tx) in self.gates.iter_mut().enumerate() {
            if let Some(tx) = tx.take() {
                let _ = tx.send(());
            }
            self.model.gates[gate] = true;
        }
        let fates = self.model.fates();
        let deadline = Instant::now() + SETTLE;
        let before = self.problems.len();
        let points: Vec<(usize, usize, SyncPoint)> = (self.points.iter().enumerate())
            .flat_map(|(uid, items)| items.iter().enumerate().filter_map(move |(i, p)| Some((uid, i, p.clone()?))))
            .collect();
        for (uid, item, point) in points {
            let what = format!("stream {uid} item {item} ({:?})", self.model.streams[uid][item]);
            self.check_point(&what, &point, &fates[uid][item], deadline);
        }
        for i in 0..self.releases.len() {
            let (host, point) = (self.releases[i].host, self.releases[i].point.clone());
            let fate = self.model.hosts[host].fate(point.value());
            self.check_point(&format!("release {point}"), &point, &fate, deadline);
        }
        let hung = self.problems[before..].iter().any(|p| p.starts_with("hang"));
        self.check_lent(&fates, deadline);
        if hung {
            self.problems.push("memory not checked: work may still run".into());
        } else {
            self.check_memory(&fates);
        }
        drop(self.never.take());
    }

    fn check_lent(&mut self, fates: &[Vec<Fate>], deadline: Instant) {
        let (_, reads) = self.model.memory(fates);
        for i in 0..self.lent.len() {
            let fate = self.fate_of(&self.lent[i].target.clone());
            if let Some(lent) = self.lent[i].lent.take() {
                let point = point_of(&lent).clone();
                let expected = match &lent {
                    Lent::WriteF32(_, sent) => Some(sent.iter().flat_map(|v| v.to_ne_bytes()).collect()),
                    Lent::WriteBytes(_, sent) => Some(sent.clone()),
                    Lent::ReadF32(_, read) | Lent::ReadBytes(_, read) => reads.get(read).cloned(),
                };
                match wait_within(lent, deadline.saturating_duration_since(Instant::now()).max(SHORT)) {
                    Within::Settled(returned) => self.check_returned(&point, &fate, returned, expected),
                    Within::TimedOut(_) => {
                        self.problems.push(format!("hang: the host buffer lent to {point} never came back"))
                    }
                    Within::Lost(e) => self.problems.push(format!("Pending of {point}: {e}, transfer lost")),
                }
            } else if let Some(returned) = self.lent[i].returned.take() {
                let point = self.points_of(&self.lent[i].target);
                self.check_returned(&point, &fate, returned, None);
            }
        }
    }

    fn points_of(&self, target: &Target) -> SyncPoint {
        match target {
            Target::Stream { stream, item } => self.points[*stream][*item].clone().expect("a lent item has a point"),
            _ => unreachable!("buffers are lent to streams"),
        }
    }

    fn check_returned(&mut self, point: &SyncPoint, fate: &Fate, returned: Returned, expected: Option<Vec<u8>>) {
        match (returned, fate) {
            (Returned::Ok(bytes), Fate::Reached) => {
                if let Some(expected) = expected {
                    if bytes != expected {
                        let at = bytes.iter().zip(&expected).position(|(a, b)| a != b);
                        self.problems.push(format!(
                            "wrong bytes from {point}: first difference at byte {at:?}: got {bytes:?}, expected {expected:?}"
                        ));
                    }
                }
            }
            (Returned::Failed(e, back), Fate::Failed(cause)) => {
                if !back {
                    self.problems
                        .push(format!("lost host buffer: {point} failed and PendingError held none (D-RETURN)"));
                }
                match &e {
                    StreamError::Wait(WaitError::Failed { cause: actual, .. }) => {
                        self.check_cause(&format!("Pending of {point}"), cause, actual)
                    }
                    other => self.problems.push(format!("Pending of {point}: {other}, expected {cause:?}")),
                }
            }
            (Returned::Ok(_), _) => self.problems.push(format!("Pending of {point} returned Ok, expected {fate:?}")),
            (Returned::Failed(e, back), _) => {
                self.problems.push(format!("Pending of {point}: {e} (buffer back: {back}), expected {fate:?}"))
            }
        }
    }

    fn check_memory(&mut self, fates: &[Vec<Fate>]) {
        let (memory, _) = self.model.memory(fates);
        for b in 0..self.buffers.len() {
            let (uid, buffer) = (self.buffers[b].uid, self.buffers[b].buffer.clone());
            for (part, bytes) in raw_bytes(&buffer).into_iter().enumerate() {
                if bytes != memory[uid] {
                    let at = bytes.iter().zip(&memory[uid]).position(|(a, b)| a != b);
                    self.problems.push(format!(
                        "wrong bytes in buffer slot {b} (part {part}) first at byte {at:?}: got {bytes:?}, expected {:?}",
                        memory[uid]
                    ));
                }
            }
        }
    }
}

/// The bytes of a buffer, read directly (one copy per part of a composite
/// buffer, which mirrors them).
fn raw_bytes(buffer: &Buffer) -> Vec<Vec<u8>> {
    if let Some(composite) = CompositeBuffer::of(buffer) {
        return composite.parts().iter().flat_map(raw_bytes).collect();
    }
    let Some(ptr) = buffer.raw().host_ptr() else { return Vec::new() };
    // SAFETY: every point of the case has settled (checked just before), so
    // no queued work touches the buffer any more, and observing the points
    // reached made their writes visible; the pointer is valid for `len()`
    // bytes while `buffer` holds the memory.
    vec![unsafe { std::slice::from_raw_parts(ptr.as_ptr(), buffer.len()) }.to_vec()]
}
