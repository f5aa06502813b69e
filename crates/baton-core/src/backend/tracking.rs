//! What the safe stream knows about the order of its work, and the check
//! of a submission's memory accesses against other streams' (the hazard
//! tracking of rule `M-ORDER`; reports are in `hazard.rs`).
//!
//! # Locking
//!
//! A submission holds its stream's submit lock for its whole length, and
//! the access logs of every buffer it touches from the check to the record
//! ([`LockedLogs`], taken in buffer-id order so two submissions never wait
//! on each other's logs in a cycle). Two streams that touch a common buffer
//! therefore check and record one after the other, and the second sees the
//! first's access; streams that share no buffer submit in parallel. A
//! backend whose raw stream submits to inner safe streams (the composite
//! device) takes their locks while holding its own: its buffers and its
//! streams are never the inner ones, so the order is always outer, then
//! inner.

use crate::loom::MutexGuard;
use std::collections::HashMap;

use crate::backend::buffer::{Access, AccessLog, Buffer, BufferRange};
use crate::backend::{HazardReport, RacingAccess};
use crate::sync::{PointStatus, SyncPoint, Timeline, TimelineId};

/// What the safe front knows about the order of its stream's work.
#[derive(Default)]
pub(crate) struct Knowledge {
    /// For each timeline, the highest value this stream knows complete
    /// before its next item (its own: the last value it submitted).
    pub(crate) waited: HashMap<TimelineId, u64>,
    /// Waits the front inserted because the caller had not ordered an access.
    pub(crate) implicit_waits: u64,
    /// Waits bridged by the relay (the stream could not wait natively).
    pub(crate) relayed_waits: u64,
    /// Races the caller left open (each closed by an inserted wait).
    pub(crate) reports: Vec<HazardReport>,
}

impl Knowledge {
    /// Records that this stream (timeline `own`) submitted value `value`.
    pub(crate) fn note_own(&mut self, own: TimelineId, value: u64) {
        let last = self.waited.entry(own).or_insert(0);
        *last = (*last).max(value);
    }

    /// Whether `access` by earlier work is ordered before new work of the
    /// stream with timeline `own`: on that stream, waited on, or settled (a
    /// failed access's work ended in its error or never ran, so it holds
    /// nothing up).
    fn orders(&self, own: &Timeline, access: &Access) -> bool {
        let tl = access.point.timeline();
        tl.same_as(own)
            || self.waited.get(&tl.id()).is_some_and(|&v| v >= access.point.value())
            || !matches!(access.point.status(), PointStatus::Pending)
    }
}

/// The stream whose submission is checked.
pub(crate) struct Submitter<'a> {
    pub(crate) label: &'a str,
    pub(crate) timeline: &'a Timeline,
    pub(crate) knowledge: &'a Knowledge,
    pub(crate) op: &'static str,
}

/// The access logs of the buffers one submission touches, locked together.
pub(crate) struct LockedLogs<'a> {
    /// By buffer id, ascending, one entry per buffer.
    logs: Vec<(u64, MutexGuard<'a, AccessLog>)>,
}

impl<'a> LockedLogs<'a> {
    /// Locks the logs of the buffers of `ranges`, in buffer-id order.
    pub(crate) fn lock(ranges: impl Iterator<Item = &'a BufferRange>) -> LockedLogs<'a> {
        let mut buffers: Vec<&'a Buffer> = ranges.map(BufferRange::buffer).collect();
        buffers.sort_unstable_by_key(|b| b.id());
        buffers.dedup_by_key(|b| b.id());
        LockedLogs { logs: buffers.into_iter().map(|b| (b.id(), b.accesses())).collect() }
    }

    fn log(&mut self, buffer: &Buffer) -> &mut AccessLog {
        let at = self.logs.binary_search_by_key(&buffer.id(), |(id, _)| *id);
        let at = at.unwrap_or_else(|_| unreachable!("every range's buffer was locked by LockedLogs::lock"));
        &mut self.logs[at].1
    }

    /// The points of the accesses of other streams that `reads` and
    /// `writes` conflict with and that `me` has not ordered before them
    /// (none covering another of the same timeline), and a report of each
    /// such race.
    pub(crate) fn unordered(
        &mut self,
        me: &Submitter<'_>,
        reads: &[BufferRange],
        writes: &[BufferRange],
    ) -> (Vec<SyncPoint>, Vec<HazardReport>) {
        let mut needed: Vec<SyncPoint> = Vec::new();
        let mut reports = Vec::new();
        let accesses = reads.iter().map(|r| (r, false)).chain(writes.iter().map(|w| (w, true)));
        for (range, write) in accesses {
            for a in self.log(range.buffer()).conflicting(write) {
                let overlaps = a.range.start < range.end() && range.start() < a.range.end;
                if !overlaps || !(write || a.write) || me.knowledge.orders(me.timeline, a) {
                    continue;
                }
                reports.push(HazardReport {
                    buffer: range.buffer().id(),
                    earlier: RacingAccess {
                        stream: a.point.timeline().label().to_string(),
                        op: a.op,
                        write: a.write,
                        range: a.range.clone(),
                    },
                    earlier_point: a.point.to_string(),
                    later: RacingAccess { stream: me.label.to_string(), op: me.op, write, range: range.range() },
                });
                if !needed.iter().any(|p| p.covers(&a.point)) {
                    needed.retain(|p| !a.point.covers(p));
                    needed.push(a.point.clone());
                }
            }
        }
        (needed, reports)
    }

    /// Records the submission's accesses, completed by `point`.
    pub(crate) fn record(
        &mut self,
        reads: &[BufferRange],
        writes: &[BufferRange],
        point: &SyncPoint,
        op: &'static str,
    ) {
        let accesses = reads.iter().map(|r| (r, false)).chain(writes.iter().map(|w| (w, true)));
        for (range, write) in accesses {
            let access = Access { range: range.range(), write, point: point.clone(), op };
            self.log(range.buffer()).record(access);
        }
    }
}
