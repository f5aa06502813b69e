//! Chrome trace-event / Perfetto JSON of what every stream did and when.
//!
//! Each traced item is bracketed by two host functions queued on its stream
//! (in stream order, so they run when the item starts and ends); the host's
//! submissions are recorded on their own track.

use baton_core::loom::Mutex;
use std::sync::Arc;
use std::time::Instant;

use baton_core::backend::Stream;

#[derive(Clone, Debug)]
struct Event {
    name: String,
    track: String,
    start_us: f64,
    end_us: f64,
}

/// Waiting against working on one stream (`--sync-profile`).
#[derive(Clone, Debug, PartialEq)]
pub struct GateProfile {
    /// The stream.
    pub stream: String,
    /// Cross-stream waits it ran.
    pub gates: usize,
    /// Time in them, µs.
    pub wait_us: f64,
    /// Median time of one, µs.
    pub wait_p50_us: f64,
    /// Time computing and copying, µs.
    pub work_us: f64,
    /// The traced span, µs.
    pub span_us: f64,
}

/// A shared recorder of trace events.
#[derive(Clone)]
pub struct Trace {
    origin: Instant,
    events: Arc<Mutex<Vec<Event>>>,
}

impl Default for Trace {
    fn default() -> Self {
        Trace { origin: Instant::now(), events: Arc::new(Mutex::new(Vec::new())) }
    }
}

impl Trace {
    /// A new, empty trace.
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&self, event: Event) {
        self.events.lock().push(event);
    }

    /// Queues `submit` on `stream`, recording when the stream starts and
    /// ends it, and records the host's submission.
    pub fn around<T, E>(&self, stream: &Stream, name: &str, submit: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let host_start = self.origin.elapsed().as_secs_f64() * 1e6;
        let start = Arc::new(Mutex::new(0f64));
        let (origin, s) = (self.origin, start.clone());
        // A marker that fails to queue only loses a trace event.
        let _ = stream.host_fn(move || {
            *s.lock() = origin.elapsed().as_secs_f64() * 1e6;
            Ok(())
        });
        let result = submit();
        let (trace, track, label) = (self.clone(), stream.label().to_string(), name.to_string());
        let _ = stream.host_fn(move || {
            let end_us = trace.origin.elapsed().as_secs_f64() * 1e6;
            let start_us = *start.lock();
            trace.push(Event { name: label, track, start_us, end_us });
            Ok(())
        });
        let host_end = self.origin.elapsed().as_secs_f64() * 1e6;
        self.push(Event {
            name: format!("submit {name}"),
            track: "host".into(),
            start_us: host_start,
            end_us: host_end,
        });
        result
    }

    /// The gate profile of each stream: how many cross-stream waits (gates)
    /// it ran, the time spent in them against the time spent working, over
    /// the traced span.
    pub fn gate_profile(&self) -> Vec<GateProfile> {
        let events = self.events.lock().clone();
        let (lo, hi) = events.iter().fold((f64::MAX, 0f64), |(lo, hi), e| (lo.min(e.start_us), hi.max(e.end_us)));
        let span_us = (hi - lo).max(1e-9);
        let mut tracks: Vec<String> = events.iter().filter(|e| e.track != "host").map(|e| e.track.clone()).collect();
        tracks.sort();
        tracks.dedup();
        tracks
            .into_iter()
            .map(|t| {
                let mine = || events.iter().filter(|e| e.track == t);
                let mut waits: Vec<f64> = mine().filter(|e| e.name == "wait").map(|e| e.end_us - e.start_us).collect();
                waits.sort_by(f64::total_cmp);
                let work_us: f64 = mine().filter(|e| e.name != "wait").map(|e| e.end_us - e.start_us).sum();
                let wait_us: f64 = waits.iter().sum();
                GateProfile {
                    stream: t,
                    gates: waits.len(),
                    wait_us,
                    wait_p50_us: waits.get(waits.len() / 2).copied().unwrap_or(0.0),
                    work_us,
                    span_us,
                }
            })
            .collect()
    }

    /// Each track's busy share of the traced span: (track, busy fraction).
    pub fn busy_shares(&self) -> Vec<(String, f64)> {
        let events = self.events.lock().clone();
        let (lo, hi) = events.iter().fold((f64::MAX, 0f64), |(lo, hi), e| (lo.min(e.start_us), hi.max(e.end_us)));
        let span = (hi - lo).max(1e-9);
        let mut tracks: Vec<String> = events.iter().map(|e| e.track.clone()).collect();
        tracks.sort();
        tracks.dedup();
        tracks
            .into_iter()
            .map(|t| {
                let busy: f64 = events
                    .iter()
                    .filter(|e| e.track == t && !e.name.starts_with("wait"))
                    .map(|e| e.end_us - e.start_us)
                    .sum();
                (t, busy / span)
            })
            .collect()
    }

    /// The trace as Chrome trace-event JSON (load in Perfetto or
    /// chrome://tracing): one thread track per stream and one for the host.
    pub fn to_json(&self) -> String {
        let events = self.events.lock().clone();
        let mut tracks: Vec<String> = events.iter().map(|e| e.track.clone()).collect();
        tracks.sort();
        tracks.dedup();
        let tid = |t: &str| tracks.iter().position(|x| x == t).unwrap_or(0) + 1;
        let mut out = String::from("{\"traceEvents\":[");
        let mut first = true;
        for (i, t) in tracks.iter().enumerate() {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(&format!(
                "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":{},\"args\":{{\"name\":\"{}\"}}}}",
                i + 1,
                t
            ));
        }
        for e in &events {
            out.push_str(&format!(
                ",{{\"ph\":\"X\",\"name\":\"{}\",\"pid\":1,\"tid\":{},\"ts\":{:.3},\"dur\":{:.3}}}",
                e.name,
                tid(&e.track),
                e.start_us,
                (e.end_us - e.start_us).max(0.0)
            ));
        }
        out.push_str("]}");
        out
    }
}
