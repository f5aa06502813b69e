//! W-FOREIGN's relay rules, on a fixture whose streams refuse every
//! native wait on another stream's point (the chaos wrapper without
//! delays), so every cross-stream wait goes through the core's relay: a
//! relayed wait on a failed point fails the stream with the point's cause,
//! and a wait the hazard tracking inserted ends when its point fails.

use std::time::Duration;

use baton_core::backend::StreamError;

use crate::chaos;
use crate::util::{assert_pending, download, expect_failure, gate, synchronize, Fixture, RULE_TIMEOUT};

/// The fixture's devices with streams that refuse every native wait on
/// another stream's point (the chaos wrapper, without delays), so every
/// cross-stream wait goes through the relay.
pub(crate) fn without_native_waits(f: &Fixture) -> Fixture {
    let fallbacks = chaos::Fallbacks { no_native_waits: true, no_foreign_access: false };
    Fixture::new(chaos::wrap_with(f.devices.iter().cloned(), 0, Duration::ZERO, fallbacks))
}

/// A stream of the second device relays its wait on the first device's
/// gated write; the gate fails, and the consumer fails with its cause.
pub(crate) fn a_relayed_wait_on_a_failed_point_fails_the_stream(f: &Fixture) {
    let (producer, consumer) = (f.stream(0), f.stream(1));
    let (t0, t1) = (f.tensor(0, &[4]), f.tensor(1, &[4]));
    let (_host, release) = gate();
    let gated = producer.wait_or_relay(&release.point(), producer.wait_policy()).expect("the producer's gate");
    let produced = producer.write_async(&t0, vec![1f32; 4]).expect("write");
    let relayed = consumer.wait_or_relay(produced.point(), consumer.wait_policy()).expect("the consumer's wait");
    assert_eq!((gated, relayed), (true, true), "both waits go through the relay");
    let consumed = consumer.write_async(&t1, vec![2f32; 4]).expect("write");
    assert_pending(consumed.point().status(), "the consumer waits for the gated producer");
    release.fail("the producer died");
    let err = expect_failure(produced, "the producer's write after its relayed gate failed");
    assert!(err.error.to_string().contains("the producer died"), "the producer's error: {}", err.error);
    let err = expect_failure(consumed, "the consumer's write after a relayed wait on a failed point");
    assert!(err.error.to_string().contains("the producer died"), "the consumer's error: {}", err.error);
    match synchronize(&consumer) {
        Err(StreamError::Failed { cause, .. }) => {
            assert!(cause.message().contains("the producer died"), "the consumer's cause: {cause}")
        }
        other => panic!("expected the consumer failed with the producer's cause, got {other:?}"),
    }
}

/// Two streams write one buffer, the first behind a gate that fails: the
/// second stream's inserted (and relayed) wait ends when the first write
/// fails, and its own write runs.
pub(crate) fn an_inserted_relayed_wait_ends_when_its_point_fails(f: &Fixture) {
    let (doomed, other) = (f.stream(0), f.stream(0));
    let t = f.tensor(0, &[16]);
    let (_host, release) = gate();
    doomed.wait_or_relay(&release.point(), doomed.wait_policy()).expect("the gate");
    let lost = doomed.write_async(&t, vec![1f32; 16]).expect("write");
    let after = other.write_async(&t, vec![2f32; 16]).expect("write");
    assert_eq!(
        (other.implicit_waits(), other.relayed_waits()),
        (1, 1),
        "the write waits for the other stream's pending write, through the relay"
    );
    drop(release);
    expect_failure(lost, "the gated write");
    let back = after.wait_within(RULE_TIMEOUT).expect("the other stream's write runs, unfailed");
    assert_eq!(back, vec![2f32; 16]);
    assert_eq!(download(&other, &t), vec![2f32; 16], "the write that ran is in memory");
}
