//! The calls that order work: stream waits (plain, relayed, bounded, with
//! a deadline on a silent peer), releases and host functions, each with the
//! refusal the model expects and its model items.

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use baton_core::sync::{Failure, SyncPoint, WaitError, WaitPolicy};

use super::{call, Run, DEADLINE, NEVER_BOUND, SETTLE};
use crate::api;
use crate::model::{Cause, Fate, Item, Target};
use crate::ops::{Deadline, HostFnKind, ReleaseEnd, STREAMS};
use crate::{CALLS, DEADLINE_WAITS, SILENT_STREAM_WAITS};

impl Run {
    /// Queues a wait on `point` (the model's `target`) with the API call the
    /// op asks for, and checks the outcome.
    pub(super) fn queue_wait(
        &mut self,
        stream: usize,
        target: Target,
        point: SyncPoint,
        relay: bool,
        bound: Option<Duration>,
    ) {
        let (s, uid) = self.stream(stream);
        let device = self.streams[stream % STREAMS].device;
        if point.timeline().same_as(s.timeline()) {
            let last = s.last_point();
            if let Ok(p) = call(s.wait(&point)) {
                if p.value() != last.value() {
                    self.problem(format!("a wait on the stream's own point queued an item: {p}"));
                }
            }
            return;
        }
        let policy = match bound {
            Some(bound) => WaitPolicy::Poll { bound },
            None => s.wait_policy(),
        };
        let native = self.native(device);
        let (result, refusal) = if relay {
            (call(s.wait_or_relay(&point, policy)).map(|_| ()), None)
        } else {
            (call(api::wait(&s, &point, policy)).map(|_| ()), (!native).then_some("ForeignPoint"))
        };
        if self.submitted("wait", uid, &result, refusal, !native && !relay) {
            let item = Item::Wait {
                target: target.clone(),
                bounded: bound.is_some(),
                expires: false,
                relayed: !native,
                settles: false,
            };
            let index = self.record(uid, item, Some(s.last_point()));
            if target == Target::Never {
                self.awaits(uid, index, &point);
            }
        }
    }

    /// Item `item` of stream `uid` waits on `point` until it times out.
    pub(super) fn awaits(&mut self, uid: usize, item: usize, point: &SyncPoint) {
        for cause in [Cause::TimedOut { stream: uid, item }, Cause::Relay { stream: uid, item }] {
            self.awaited.insert(cause, point.to_string());
        }
    }

    /// The last point of every stream that stays pending until the end of
    /// the case (model stream uid, item).
    pub(super) fn silent_streams(&self) -> Vec<(usize, usize)> {
        let fates = self.model.fates();
        (0..self.points.len())
            .filter_map(|uid| {
                let item = self.points[uid].iter().rposition(Option::is_some)?;
                self.model.silent(&fates, &Target::Stream { stream: uid, item }).then_some((uid, item))
            })
            .collect()
    }

    /// `WaitSilent`: a stream wait with a short deadline on a peer that
    /// stays silent past it. Its outcome cannot depend on timing: the
    /// never-released point is held until the checks are done; a silent
    /// stream's point stays pending until the end of the case opens the
    /// gates, which waits for these waits first, and the waiting stream's
    /// earlier work settles by itself, so the wait starts before that.
    pub(super) fn wait_silent(&mut self, stream: usize, on: usize, never: bool, deadline: Deadline) {
        if !never && self.silent_streams().is_empty() {
            // Silences a peer first: a host function that blocks until the
            // end of the case.
            let peer = if on % STREAMS == stream % STREAMS { on + 1 } else { on };
            self.host_fn(peer, HostFnKind::Silent);
        }
        let fates = self.model.fates();
        let silent = self.silent_streams();
        let (target, point) = match silent.get(on % silent.len().max(1)) {
            Some(&(uid, item)) if !never => {
                (Target::Stream { stream: uid, item }, self.points[uid][item].clone().expect("a point"))
            }
            _ => (Target::Never, self.never.as_ref().expect("held until the end").point()),
        };
        let (s, uid) = self.stream(stream);
        if target != Target::Never && fates.get(uid).and_then(|f| f.last()) == Some(&Fate::Pending) {
            self.skipped += 1; // the wait could start after the gates open
            return;
        }
        let native = self.native(self.streams[stream % STREAMS].device);
        let policy = s.wait_policy();
        let short = s.clone().with_deadline(Some(DEADLINE));
        let (result, refusal) = match deadline {
            Deadline::Edge => (call(api::wait_with_deadline(&s, &point, policy, DEADLINE)).map(|_| ()), !native),
            Deadline::Stream => (call(short.wait(&point)).map(|_| ()), !native),
            Deadline::StreamRelay => (call(short.wait_or_relay(&point, policy)).map(|_| ()), false),
        };
        drop(short);
        if self.submitted("deadline wait", uid, &result, refusal.then_some("ForeignPoint"), refusal) {
            DEADLINE_WAITS.fetch_add(1, Ordering::Relaxed);
            let item =
                Item::Wait { target: target.clone(), bounded: true, expires: true, relayed: !native, settles: false };
            let index = self.record(uid, item, Some(s.last_point()));
            self.awaits(uid, index, &point);
            if target != Target::Never {
                SILENT_STREAM_WAITS.fetch_add(1, Ordering::Relaxed);
                self.expiring.push((uid, index));
            }
        }
    }

    /// A bound for a wait on `target`, if the op asks for one and the
    /// target settles by itself (a bound on a point the test will settle
    /// later would race the test).
    pub(super) fn bound_for(&self, target: &Target, bounded: bool) -> Option<Duration> {
        let settles = match target {
            Target::Stream { stream, item } => self.model.fates()[*stream][*item] != Fate::Pending,
            Target::Host { host, value } => self.model.hosts[*host].fate(*value) != Fate::Pending,
            Target::Never => false,
        };
        (bounded && settles).then_some(SETTLE * 2)
    }

    pub(super) fn wait_stream(&mut self, stream: usize, on: usize, relay: bool, bounded: bool) {
        let (o, ouid) = self.stream(on);
        let Some(item) = self.model.streams[ouid].len().checked_sub(1) else {
            self.skipped += 1;
            return;
        };
        let target = Target::Stream { stream: ouid, item };
        let bound = self.bound_for(&target, bounded);
        self.queue_wait(stream, target, o.last_point(), relay, bound);
    }

    pub(super) fn wait_release(&mut self, stream: usize, release: usize, relay: bool, bounded: bool) {
        if self.releases.is_empty() {
            self.skipped += 1;
            return;
        }
        let r = &self.releases[release % self.releases.len()];
        let target = Target::Host { host: r.host, value: r.point.value() };
        let point = r.point.clone();
        let bound = self.bound_for(&target, bounded);
        self.queue_wait(stream, target, point, relay, bound);
    }

    pub(super) fn wait_never(&mut self, stream: usize, relay: bool) {
        let point = self.never.as_ref().expect("held until the end").point();
        self.queue_wait(stream, Target::Never, point, relay, Some(NEVER_BOUND));
    }

    pub(super) fn end_release(&mut self, release: usize, end: ReleaseEnd) {
        let held: Vec<usize> = (0..self.releases.len()).filter(|&i| self.releases[i].release.is_some()).collect();
        if held.is_empty() {
            self.skipped += 1;
            return;
        }
        self.end(held[release % held.len()], end);
    }

    pub fn end(&mut self, index: usize, end: ReleaseEnd) {
        let entry = &mut self.releases[index];
        let (host, value) = (entry.host, entry.point.value());
        let release = entry.release.take().expect("held");
        CALLS.fetch_add(1, Ordering::Relaxed);
        match end {
            ReleaseEnd::Signal => {
                release.signal();
                self.model.hosts[host].signal(value);
            }
            ReleaseEnd::Drop => {
                drop(release);
                self.model.hosts[host].fail(value, Cause::Host { host, value, abandoned: true });
            }
            ReleaseEnd::Fail => {
                release.fail(format!("fail-{host}-{value}"));
                self.model.hosts[host].fail(value, Cause::Host { host, value, abandoned: false });
            }
            ReleaseEnd::FailWith(n) => match self.failed_cause(n) {
                Some((cause, failure)) => {
                    release.fail_with(failure);
                    self.model.hosts[host].fail(value, cause);
                }
                None => {
                    release.fail(format!("fail-{host}-{value}"));
                    self.model.hosts[host].fail(value, Cause::Host { host, value, abandoned: false });
                }
            },
        }
    }

    /// The `n`-th failed point of the case (as the model says), once it
    /// has failed: its model cause and its actual first cause.
    pub(super) fn failed_cause(&mut self, n: usize) -> Option<(Cause, Failure)> {
        let fates = self.model.fates();
        let failed: Vec<(SyncPoint, Cause)> = (self.points.iter().enumerate())
            .flat_map(|(uid, items)| items.iter().enumerate().map(move |(i, p)| (uid, i, p)))
            .filter_map(|(uid, i, p)| match (p, &fates[uid][i]) {
                (Some(p), Fate::Failed(cause)) => Some((p.clone(), cause.clone())),
                _ => None,
            })
            .collect();
        let (point, cause) = failed.get(n % failed.len().max(1))?.clone();
        CALLS.fetch_add(1, Ordering::Relaxed);
        match point.wait_timeout(SETTLE) {
            Err(WaitError::Failed { cause: failure, .. }) => {
                self.check_cause(&format!("{point}, whose cause a release takes"), &cause, &failure);
                Some((cause, failure))
            }
            other => {
                self.problem(format!("{point}: {other:?}, expected {cause:?}"));
                None
            }
        }
    }

    pub(super) fn host_fn(&mut self, stream: usize, kind: HostFnKind) {
        let (s, uid) = self.stream(stream);
        let item_index = self.model.streams[uid].len();
        let (item, result) = match kind {
            HostFnKind::Ok => (Item::HostOk, call(s.host_fn(|| Ok(())))),
            HostFnKind::Err => {
                let message = format!("boom-{uid}-{item_index}");
                (Item::HostErr, call(s.host_fn(move || Err(message))))
            }
            HostFnKind::Silent => {
                let (tx, rx) = mpsc::channel::<()>();
                let result = call(s.host_fn(move || {
                    // Bounded, so a test that panics before opening the gate
                    // does not leave the worker blocked forever.
                    rx.recv_timeout(Duration::from_secs(120)).map_err(|e| format!("silent peer: {e}"))
                }));
                let gate = self.model.new_gate();
                self.gates.push(Some(tx));
                (Item::Silent { gate }, result)
            }
        };
        if self.submitted("host_fn", uid, &result, None, false) {
            self.record(uid, item, result.ok());
        } else if let Item::Silent { gate } = item {
            self.model.gates[gate] = true;
        }
    }
}
