//! Prometheus' text format (version 0.0.4): a family's help and type
//! lines and its samples.

use std::fmt::Write;

use crate::engine::{HistogramSnapshot, LATENCY_BUCKETS};

/// A label value with `\`, `"` and newlines escaped.
pub(super) fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// One metric family: its help and type lines, then `samples` (name
/// suffix, labels, value).
pub(super) fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(&str, String, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (suffix, labels, value) in samples {
        let labels = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = writeln!(out, "{name}{suffix}{labels} {value}");
    }
}

/// A family of one sample without labels.
pub(super) fn single(out: &mut String, name: &str, kind: &str, help: &str, value: f64) {
    family(out, name, kind, help, &[("", String::new(), value)]);
}

/// A latency histogram: its buckets (cumulative), sum and count.
pub(super) fn histogram(out: &mut String, name: &str, help: &str, h: &HistogramSnapshot) {
    let mut samples: Vec<(&str, String, f64)> = LATENCY_BUCKETS
        .iter()
        .zip(&h.cumulative)
        .map(|(bound, &count)| ("_bucket", format!("le=\"{bound}\""), count as f64))
        .collect();
    samples.push(("_bucket", "le=\"+Inf\"".into(), h.count() as f64));
    samples.push(("_sum", String::new(), h.sum_seconds));
    samples.push(("_count", String::new(), h.count() as f64));
    family(out, name, "histogram", help, &samples);
}
