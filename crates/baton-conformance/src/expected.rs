//! Expected failures: the rules a set of devices may fail, and why, and
//! the verdict of a check against them.
//!
//! The list is derived from what the backends declare, in one place, for
//! both the test macros and `baton conformance`: a rule that calls
//! `Stream::wait` on a point of the other device fails with
//! `StreamError::ForeignPoint` where that device's streams cannot wait
//! natively on it (`RawStream::can_wait_on`), which W-FOREIGN allows (the
//! relay, `Stream::wait_or_relay`, bridges such waits). Two logical Vulkan
//! devices are such a pair. An expected failure must still fail: one that
//! passes is an error ("unexpected pass"), so a list never goes stale.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use baton_core::backend::{Device, DeviceError};

/// The rules that order a stream of the second device after a point of the
/// first with `Stream::wait` itself (not the relay).
pub const NATIVE_CROSS_DEVICE_WAIT_RULES: &[&str] = &["w_order", "m_order"];

/// A rule the devices under test are allowed to fail, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedFailure {
    /// The rule's test name (`w_order`).
    pub rule: &'static str,
    /// Why these devices fail it, for people.
    pub why: String,
}

/// The rules `devices` (the suite's pair: the first two) may fail: those of
/// [`NATIVE_CROSS_DEVICE_WAIT_RULES`] where the second device's streams
/// cannot wait natively on the first device's timeline.
pub fn expected_failures(devices: &[Arc<dyn Device>]) -> Result<Vec<ExpectedFailure>, DeviceError> {
    let (Some(first), Some(second)) = (devices.first(), devices.get(1)) else { return Ok(Vec::new()) };
    let producer = first.new_stream()?;
    let consumer = second.new_stream()?;
    if consumer.raw().can_wait_on(&producer.last_point()) {
        return Ok(Vec::new());
    }
    let why = format!(
        "streams of {} cannot wait natively on a timeline of {} (W-FOREIGN: the wait is refused and \
         Stream::wait_or_relay bridges it through a host thread); this rule calls Stream::wait itself",
        second.info().name,
        first.info().name
    );
    Ok(NATIVE_CROSS_DEVICE_WAIT_RULES.iter().map(|&rule| ExpectedFailure { rule, why: why.clone() }).collect())
}

/// The expected failures a backend lists by hand (`unsupported:` of
/// [`contract_tests!`](crate::contract_tests)): features it lacks.
pub fn listed_unsupported(rules: &[&str]) -> Vec<ExpectedFailure> {
    rules
        .iter()
        .map(|&rule| {
            let known = crate::cases::CONTRACT_RULES.iter().find(|(n, _)| *n == rule).map(|(n, _)| *n);
            match known {
                Some(rule) => ExpectedFailure { rule, why: "the backend lists it as unsupported".into() },
                None => panic!("the unsupported list names {rule:?}, which is no contract rule"),
            }
        })
        .collect()
}

/// The verdict of one check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It passed, as it should.
    Passed,
    /// It failed, and it should not have: the message of its panic.
    Failed(String),
    /// It failed, as the devices may (`why`), with its message.
    Expected {
        /// Why it may fail.
        why: String,
        /// How it failed.
        message: String,
    },
    /// It was expected to fail (`why`) but passed: the list is stale.
    UnexpectedPass {
        /// Why it was expected to fail.
        why: String,
    },
}

impl Outcome {
    /// Whether the verdict is good: a pass or an expected failure.
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Passed | Outcome::Expected { .. })
    }

    /// One word for tables and JSON: `pass`, `FAIL`, `expected`, `UNEXPECTED PASS`.
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Passed => "pass",
            Outcome::Failed(_) => "FAIL",
            Outcome::Expected { .. } => "expected",
            Outcome::UnexpectedPass { .. } => "UNEXPECTED PASS",
        }
    }
}

/// Runs `check`, catching its panic, and judges it against `expected`.
pub fn judge(expected: Option<&ExpectedFailure>, check: &dyn Fn()) -> Outcome {
    let message = catch_unwind(AssertUnwindSafe(check)).err().map(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    });
    match (message, expected) {
        (None, None) => Outcome::Passed,
        (Some(message), None) => Outcome::Failed(message),
        (Some(message), Some(e)) => Outcome::Expected { why: e.why.clone(), message },
        (None, Some(e)) => Outcome::UnexpectedPass { why: e.why.clone() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected() -> ExpectedFailure {
        ExpectedFailure { rule: "w_order", why: "a reason".into() }
    }

    #[test]
    fn an_expected_failure_that_fails_is_ok_and_keeps_its_reason() {
        let outcome = judge(Some(&expected()), &|| panic!("refused"));
        assert_eq!(outcome, Outcome::Expected { why: "a reason".into(), message: "refused".into() });
        assert!(outcome.is_ok());
    }

    #[test]
    fn an_expected_failure_that_passes_is_an_unexpected_pass() {
        let outcome = judge(Some(&expected()), &|| {});
        assert_eq!(outcome, Outcome::UnexpectedPass { why: "a reason".into() });
        assert!(!outcome.is_ok());
    }

    #[test]
    fn an_unexpected_failure_fails_with_its_message() {
        let outcome = judge(None, &|| panic!("broken {}", 7));
        assert_eq!(outcome, Outcome::Failed("broken 7".into()));
        assert!(!outcome.is_ok());
        assert_eq!(judge(None, &|| {}), Outcome::Passed);
    }

    #[test]
    fn the_listed_rules_are_contract_rules() {
        for rule in NATIVE_CROSS_DEVICE_WAIT_RULES {
            assert!(crate::cases::CONTRACT_RULES.iter().any(|(n, _)| n == rule), "{rule} is no contract rule");
        }
    }
}
