//! Fanout through real sessions in the test runtime: publisher → relay → N subscribers, each
//! hop a moq-lite-05 session over an in-memory link. The cost per delivered frame includes
//! both sessions' encoding, decoding and stream handling, and the relay's model fanout; it
//! excludes QUIC, sockets and the executor of a real driver.
//!
//! ```text
//! cargo bench -p moqx-net --bench session    # wall-clock: median ns per delivered frame
//! cargo xtask bench --instructions          # instructions per delivered frame (callgrind)
//! ```
//!
//! - **chat**: one 100-byte frame per group; a round publishes one group and runs until
//!   every subscriber has it.
//! - **media**: thirty 4 KB frames per group; a round publishes one group, frame by frame,
//!   and runs until every subscriber has all thirty.
//!
//! The test runtime is deterministic, so callgrind counts are exact.
//!
//! The command line is `bench-harness`'s (`--list`, `--only NAME --rounds K`, or a filter).
#![allow(missing_docs)]

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use bench_harness::Bench;
use bytes::Bytes;
use moqx_net::model::{BroadcastProducer, Origin, Track, TrackProducer};
use moqx_net::runtime::test::{LinkConfig, TestRuntime};
use moqx_net::session::{self, Session, SessionConfig};

fn main() {
    let mut benches = Vec::new();
    for subscribers in [1u64, 64, 1000] {
        benches.push(Bench::new(
            format!("session chat: 100 B x1/group to {subscribers}"),
            subscribers,
            "delivery",
            move || round(subscribers as usize, 100, 1),
        ));
    }
    for subscribers in [1u64, 64] {
        benches.push(Bench::new(
            format!("session media: 4 KB x30/group to {subscribers}"),
            subscribers * 30,
            "delivery",
            move || round(subscribers as usize, 4096, 30),
        ));
    }
    bench_harness::main(benches);
}

/// Everything a round needs, kept alive between rounds.
struct Fanout {
    runtime: TestRuntime,
    track: TrackProducer,
    delivered: Rc<Cell<u64>>,
    _keep: (BroadcastProducer, Vec<Session>),
}

/// Builds publisher → relay → `subscribers`, all reading, and returns one round: publish a
/// group of `frames` frames of `size` bytes and run until every subscriber has them.
fn round(subscribers: usize, size: usize, frames: u64) -> impl FnMut() {
    let mut fanout = connect(subscribers);
    let payload = Bytes::from(vec![b'x'; size]);
    let mut timestamp = 0;
    move || {
        let expected = fanout.delivered.get() + frames * subscribers as u64;
        let mut group = fanout.track.append_group();
        for _ in 0..frames {
            group.write(timestamp, payload.clone());
            timestamp += 1;
            fanout.runtime.run_until_stalled();
        }
        group.finish();
        let delivered = fanout.delivered.clone();
        let done = fanout
            .runtime
            .run_until(Duration::from_secs(10), || delivered.get() >= expected);
        assert!(done, "every subscriber got the group");
    }
}

fn connect(subscribers: usize) -> Fanout {
    let runtime = TestRuntime::new(1, epoch());
    let link = {
        let mut link_config = LinkConfig::default();
        link_config.latency = Duration::from_millis(1);
        link_config
    };
    let relay = Origin::new();
    let relay_config = SessionConfig::default()
        .with_publisher(&relay)
        .with_subscriber(&relay);
    let mut sessions = Vec::new();

    let origin = Origin::new();
    let broadcast = BroadcastProducer::new();
    let track = broadcast.create_track(Track::new("t"));
    origin.publish("live", &broadcast).unwrap();
    let (a, b) = runtime.connect(link.clone());
    sessions.push(session::connect(
        runtime.clone(),
        a,
        SessionConfig::default().with_publisher(&origin),
    ));
    sessions.push(session::accept(runtime.clone(), b, relay_config.clone()));

    let delivered = Rc::new(Cell::new(0u64));
    let mut origins = Vec::new();
    for _ in 0..subscribers {
        let (c, d) = runtime.connect(link.clone());
        let seen = Origin::new();
        sessions.push(session::connect(
            runtime.clone(),
            c,
            SessionConfig::default().with_subscriber(&seen),
        ));
        sessions.push(session::accept(runtime.clone(), d, relay_config.clone()));
        origins.push(seen);
    }
    let announced = runtime.run_until(Duration::from_secs(10), || {
        origins
            .iter()
            .all(|o| o.consume_broadcast("live").is_some())
    });
    assert!(announced, "every subscriber discovers the broadcast");
    for seen in &origins {
        let broadcast = seen.consume_broadcast("live").expect("announced");
        let delivered = delivered.clone();
        runtime.spawn_task(async move {
            let Ok(mut track) = broadcast.subscribe_track("t").await else {
                return;
            };
            while let Ok(Some(mut group)) = track.next_group().await {
                while let Ok(Some(_frame)) = group.read_frame().await {
                    delivered.set(delivered.get() + 1);
                }
            }
        });
    }
    let subscribed = runtime.run_until(Duration::from_secs(10), || track.consumer_count() > 0);
    assert!(subscribed, "the relay subscribes upstream");
    // Let every downstream subscription reach the relay before the first round.
    runtime.advance(Duration::from_millis(100));
    Fanout {
        runtime,
        track,
        delivered,
        _keep: (broadcast, sessions),
    }
}

/// Where virtual time starts: the bench, like a driver, reads the clock once.
#[allow(clippy::disallowed_methods)]
fn epoch() -> std::time::Instant {
    std::time::Instant::now()
}
