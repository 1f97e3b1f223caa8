//! Faulty links and dropped connections, and the seed that replays a run.

use std::time::Duration;

use bytes::Bytes;
use moqx_net::Error;
use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::runtime::test::{LinkConfig, TestRuntime};
use moqx_net::session::{self, SessionConfig};

use crate::common::relay::*;
use crate::common::{epoch, seeded};

/// Runs a publisher → relay → subscriber session over a faulty link and returns what the
/// subscriber saw and when, as text.
fn faulty_run(seed: u64) -> Vec<String> {
    let runtime = TestRuntime::new(seed, epoch());
    let faults = {
        let mut link_config = LinkConfig::default();
        link_config.latency = Duration::from_millis(30);
        link_config.bandwidth = Some(2_000_000);
        link_config.reorder = Duration::from_millis(20);
        link_config.reset_probability = 0.05;
        link_config
    };
    let relay_origin = Origin::new();
    let relay_config = SessionConfig::default()
        .with_publisher(&relay_origin)
        .with_subscriber(&relay_origin);
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new();
    let mut track = broadcast.create_track(Track::new("video"));
    origin.publish("live", &broadcast).unwrap();
    let (a, b) = runtime.connect(faults.clone());
    let _publisher = session::connect(
        runtime.clone(),
        a,
        SessionConfig::default().with_publisher(&origin),
    );
    let _relay_a = session::accept(runtime.clone(), b, relay_config.clone());
    let (c, d) = runtime.connect(faults);
    let seen = Origin::new();
    let _subscriber = session::connect(
        runtime.clone(),
        c,
        SessionConfig::default().with_subscriber(&seen),
    );
    let _relay_b = session::accept(runtime.clone(), d, relay_config);
    assert!(runtime.run_until(5 * SECOND, || seen.consume_broadcast("live").is_some()));
    let received = read_track(&runtime, &seen, "live", "video");
    assert!(runtime.run_until(5 * SECOND, || track.consumer_count() > 0));
    for i in 0..50u64 {
        let mut group = track.append_group();
        // Large enough to travel as a write of its own after the group's header, where the
        // link's reset faults apply.
        group.write(i * 33, Bytes::from(vec![i as u8; 2000]));
        group.finish();
        runtime.advance(Duration::from_millis(33));
    }
    runtime.advance(5 * SECOND);
    let frames = received.frames.borrow();
    let mut trace: Vec<String> = frames
        .iter()
        .map(|f| format!("{}:{}", f[0], f.len()))
        .collect();
    trace.push(format!("end at {:?}", runtime.elapsed()));
    trace
}

#[test]
fn the_same_seed_gives_the_same_run_under_faults() {
    let first = faulty_run(12);
    assert_eq!(first, faulty_run(12), "same seed, same run");
    assert!(
        first.len() > 10,
        "most groups get through resets and reordering: {first:?}"
    );
    assert!(
        first.len() < 51,
        "some groups were cut off in flight: {first:?}"
    );
    assert_ne!(first, faulty_run(13), "another seed draws other faults");
}

#[test]
fn a_dropped_connection_ends_the_sessions_and_their_broadcasts() {
    seeded(14, |runtime| {
        let origin = Origin::new();
        let broadcast = BroadcastProducer::new();
        origin.publish("live", &broadcast).unwrap();
        let relay_origin = Origin::new();
        let (a, b) = runtime.connect({
            let mut link_config = LinkConfig::default();
            link_config.drop_after = Some(2 * SECOND);
            link_config
        });
        let publisher = session::connect(
            runtime.clone(),
            a,
            SessionConfig::default().with_publisher(&origin),
        );
        let relay = session::accept(
            runtime.clone(),
            b,
            SessionConfig::default().with_subscriber(&relay_origin),
        );
        assert!(runtime.run_until(SECOND, || relay_origin.consume_broadcast("live").is_some()));
        assert!(runtime.run_until(5 * SECOND, || publisher.is_closed() && relay.is_closed()));
        assert!(relay_origin.consume_broadcast("live").is_none());
        let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
        assert_eq!(
            relay.poll_closed(&waiter),
            std::task::Poll::Ready(Error::Transport)
        );
    });
}

#[test]
fn a_failing_seeded_test_names_its_seed_in_the_panic() {
    let panic = std::panic::catch_unwind(|| seeded(7, |_| panic!("boom"))).unwrap_err();
    let message = panic.downcast_ref::<String>().expect("a formatted message");
    assert!(message.starts_with("boom\n"), "{message}");
    assert!(
        message.contains("failing seed: MOQ_TEST_SEED="),
        "{message}"
    );
}
