//! Whole sessions in the test runtime: publisher → relay → subscribers, in virtual time.
//!
//! Each test runs with a seed (`MOQ_TEST_SEED` replays one) and names it in the failure message.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::relay::*;
use common::{epoch, seeded};
use moq_net::Error;
use moq_net::model::{BroadcastProducer, Origin, Track};
use moq_net::runtime::test::{LinkConfig, TestRuntime};
use moq_net::session::{self, Session, SessionConfig};

#[test]
fn a_frame_flows_from_publisher_through_relay_to_subscriber() {
    seeded(1, |runtime| {
        let mut relay = Relay::new();
        let (_publisher, _broadcast, mut track) =
            publisher(runtime, &mut relay, "room/alice", "chat");
        let (_subscriber, origin) = subscriber(runtime, &mut relay);
        assert!(
            runtime.run_until(SECOND, || origin.consume_broadcast("room/alice").is_some()),
            "the subscriber discovers the broadcast through the relay"
        );
        let received = read_track(runtime, &origin, "room/alice", "chat");
        assert!(
            runtime.run_until(SECOND, || track.consumer_count() > 0),
            "the subscription reaches the publisher"
        );
        let mut group = track.append_group();
        group.write(1000, "hello");
        group.finish();
        assert!(
            runtime.run_until(SECOND, || received.frames.borrow().len() == 1),
            "the frame arrives"
        );
        assert_eq!(received.frames.borrow()[0], "hello");
    });
}

#[test]
fn a_late_joiner_starts_at_the_latest_group() {
    seeded(2, |runtime| {
        let mut relay = Relay::new();
        let (_p, mut track, _s, first) = live(runtime, &mut relay);
        for (timestamp, text) in [(0, "one"), (1, "two"), (2, "three")] {
            send(&mut track, timestamp, text);
        }
        assert!(runtime.run_until(SECOND, || first.frames.borrow().len() == 3));

        // A second subscriber joins now: the relay has the track cached, so it starts at the
        // latest group, not at the first.
        let (_s2, late_origin) = subscriber(runtime, &mut relay);
        assert!(runtime.run_until(SECOND, || late_origin.consume_broadcast("live").is_some()));
        let late = read_track(runtime, &late_origin, "live", "video");
        assert!(runtime.run_until(SECOND, || late.frames.borrow().len() == 1));
        send(&mut track, 3, "four");
        assert!(runtime.run_until(SECOND, || late.frames.borrow().len() == 2));
        assert_eq!(*late.frames.borrow(), ["three", "four"]);
        assert_eq!(first.frames.borrow().len(), 4);
    });
}

#[test]
fn the_last_subscriber_leaving_cancels_upstream() {
    seeded(3, |runtime| {
        let mut relay = Relay::new();
        let (_p, mut track, subscriber_session, received) = live(runtime, &mut relay);
        send(&mut track, 0, "hi");
        assert!(runtime.run_until(SECOND, || received.frames.borrow().len() == 1));

        // The subscriber goes away: the relay's copy becomes unused. For the linger (1 s by
        // default) the relay keeps its upstream subscription, then it unsubscribes.
        subscriber_session.close(Error::Cancel);
        runtime.advance(Duration::from_millis(800));
        assert_eq!(
            track.consumer_count(),
            1,
            "still subscribed during the linger"
        );
        assert!(
            runtime.run_until(SECOND, || track.consumer_count() == 0),
            "the publisher's track is no longer consumed"
        );
    });
}

/// Regression (found by fuzzing `server_session`): the relay's last viewer of a track left,
/// and during the linger that followed the publisher ended the subscription. Its
/// sub-machine was gone, but the route kept the linger and the waker of the finished
/// sub-machine: once the linger was over, the session woke it on every pass of its loop,
/// and the loop went on for as long as the route waited for trailing groups, which within
/// one turn (the clock is read once a turn) was forever. A peer could hang a relay's
/// thread. The scenario runs on a thread of its own so that a regression fails the test
/// instead of hanging the suite; on every version (before -05 the wait for trailing groups
/// is always the whole timeout, so the hang was surest there).
#[test]
fn a_subscription_its_publisher_ends_during_the_linger_does_not_hang_the_relay() {
    use moq_net::coding::Version;
    for version in [
        Version::Lite04,
        Version::Lite05,
        Version::Lite03,
        Version::Lite06Wip,
    ] {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            seeded(5, |runtime| {
                let mut relay = Relay::new();
                relay.base.version = version;
                relay.link.protocol = Some(version.alpn().to_owned());
                let at_version = |config: SessionConfig| SessionConfig { version, ..config };
                let publisher_origin = Origin::new();
                let broadcast = BroadcastProducer::new();
                let mut track = broadcast.create_track(Track::new("video"));
                publisher_origin.publish("live", &broadcast).unwrap();
                let _publisher = relay.connect(
                    runtime,
                    at_version(SessionConfig {
                        publish: Some(publisher_origin),
                        ..SessionConfig::default()
                    }),
                );
                let origin = Origin::new();
                let viewer = relay.connect(
                    runtime,
                    at_version(SessionConfig {
                        subscribe: Some(origin.clone()),
                        ..SessionConfig::default()
                    }),
                );
                assert!(runtime.run_until(SECOND, || origin.consume_broadcast("live").is_some()));
                let received = read_track(runtime, &origin, "live", "video");
                assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));
                send(&mut track, 0, "hi");
                assert!(runtime.run_until(SECOND, || received.frames.borrow().len() == 1));

                // The viewer leaves: the relay lingers (1 s). Halfway through, the
                // publisher ends the track; the relay then waits (1 s) for trailing groups.
                viewer.close(Error::Cancel);
                runtime.advance(Duration::from_millis(500));
                assert_eq!(track.consumer_count(), 1, "the relay lingers");
                track.finish();
                // Past the linger's end and the trailing wait's: each turn returns.
                for _ in 0..30 {
                    runtime.advance(Duration::from_millis(100));
                }
            });
            let _ = done.send(());
        });
        // Milliseconds of work; the bound only tells a hang from a finished run.
        finished
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|error| {
                panic!("{version:?}: the relay's turns never returned ({error})")
            });
    }
}

#[test]
fn a_subscriber_coming_back_within_the_linger_finds_the_upstream_subscription_running() {
    seeded(4, |runtime| {
        let mut relay = Relay::new();
        let (_p, mut track, subscriber_session, received) = live(runtime, &mut relay);
        send(&mut track, 0, "hi");
        assert!(runtime.run_until(SECOND, || received.frames.borrow().len() == 1));

        subscriber_session.close(Error::Cancel);
        runtime.advance(Duration::from_millis(500));
        assert_eq!(track.consumer_count(), 1, "the relay lingers");
        let (_s2, origin) = subscriber(runtime, &mut relay);
        assert!(runtime.run_until(SECOND, || origin.consume_broadcast("live").is_some()));
        let again = read_track(runtime, &origin, "live", "video");
        // Through the end of the first linger and long after, the publisher stays
        // subscribed to once, by the relay (never cancelled and asked again), and a new
        // group reaches the returning subscriber.
        for _ in 0..30 {
            runtime.advance(Duration::from_millis(100));
            assert_eq!(track.consumer_count(), 1);
        }
        send(&mut track, 1, "again");
        assert!(runtime.run_until(SECOND, || {
            again
                .frames
                .borrow()
                .last()
                .is_some_and(|frame| frame == "again")
        }));
    });
}

#[test]
fn a_dropped_publisher_track_ends_subscriptions_with_dropped() {
    seeded(4, |runtime| {
        let mut relay = Relay::new();
        let (_p, mut track, _s, received) = live(runtime, &mut relay);
        send(&mut track, 0, "last words");
        assert!(runtime.run_until(SECOND, || received.frames.borrow().len() == 1));
        drop(track);
        assert!(runtime.run_until(SECOND, || received.end.borrow().is_some()));
        assert_eq!(*received.end.borrow(), Some(Err(Error::Dropped)));
    });
}

#[test]
fn a_finished_publisher_track_ends_subscriptions_cleanly() {
    seeded(5, |runtime| {
        let mut relay = Relay::new();
        let (_p, mut track, _s, received) = live(runtime, &mut relay);
        send(&mut track, 0, "bye");
        track.finish();
        assert!(runtime.run_until(5 * SECOND, || received.end.borrow().is_some()));
        assert_eq!(*received.frames.borrow(), ["bye"]);
        assert_eq!(*received.end.borrow(), Some(Ok(())));
        assert!(
            relay.sessions.iter().all(|session| !session.is_closed()),
            "ending a track closes no session"
        );
    });
}

#[test]
fn a_publisher_disconnecting_unannounces_its_broadcasts() {
    seeded(6, |runtime| {
        let mut relay = Relay::new();
        let (publisher_session, _b, _track) = publisher(runtime, &mut relay, "live", "video");
        let (_s, origin) = subscriber(runtime, &mut relay);
        assert!(runtime.run_until(SECOND, || origin.consume_broadcast("live").is_some()));
        publisher_session.close(Error::Cancel);
        assert!(
            runtime.run_until(SECOND, || origin.consume_broadcast("live").is_none()),
            "the relay and then the subscriber drop the broadcast"
        );
        assert!(relay.origin.consume_broadcast("live").is_none());
    });
}

#[test]
fn a_thousand_subscribers_read_one_track_through_one_relay() {
    seeded(7, |runtime| {
        let mut relay = Relay::new();
        let (_p, _b, mut track) = publisher(runtime, &mut relay, "room", "chat");
        let subscribers: Vec<(Session, Origin)> =
            (0..1000).map(|_| subscriber(runtime, &mut relay)).collect();
        assert!(runtime.run_until(SECOND, || {
            subscribers
                .iter()
                .all(|(_, origin)| origin.consume_broadcast("room").is_some())
        }));
        let received: Vec<Received> = subscribers
            .iter()
            .map(|(_, origin)| read_track(runtime, origin, "room", "chat"))
            .collect();
        assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));
        // The relay has one upstream subscription however many subscribers it serves.
        assert_eq!(track.consumer_count(), 1);
        for (timestamp, text) in [(0, "a"), (1, "b"), (2, "c")] {
            send(&mut track, timestamp, text);
        }
        assert!(runtime.run_until(SECOND, || {
            received.iter().all(|r| r.frames.borrow().len() == 3)
        }));
        for r in &received {
            assert_eq!(*r.frames.borrow(), ["a", "b", "c"]);
        }
    });
}

#[test]
fn ten_thousand_broadcasts_are_discovered() {
    seeded(8, |runtime| {
        let mut relay = Relay::new();
        let origin = Origin::new();
        let broadcasts: Vec<BroadcastProducer> = (0..10_000)
            .map(|i| {
                let broadcast = BroadcastProducer::new();
                origin.publish(format!("rooms/{i}"), &broadcast).unwrap();
                broadcast
            })
            .collect();
        let _publisher = relay.connect(
            runtime,
            SessionConfig {
                publish: Some(origin),
                ..SessionConfig::default()
            },
        );
        let (_s, seen) = subscriber(runtime, &mut relay);
        assert!(runtime.run_until(10 * SECOND, || seen.paths("rooms").len() == 10_000));
        drop(broadcasts);
        assert!(runtime.run_until(10 * SECOND, || seen.paths("rooms").is_empty()));
    });
}

#[test]
fn a_ring_of_three_relays_delivers_once_and_drops_looped_announcements() {
    seeded(9, |runtime| {
        let (mut first, mut second, mut third) = (
            Relay::with_id(101),
            Relay::with_id(102),
            Relay::with_id(103),
        );
        first.link(runtime, &mut second);
        second.link(runtime, &mut third);
        third.link(runtime, &mut first);
        let (publisher_session, _b, mut track) = publisher(runtime, &mut first, "live", "video");
        let (_s, origin) = subscriber(runtime, &mut third);
        assert!(runtime.run_until(SECOND, || origin.consume_broadcast("live").is_some()));

        // Every relay knows the broadcast, with a route that never contains itself.
        for relay in [&first, &second, &third] {
            let broadcast = relay.origin.consume_broadcast("live").expect("announced");
            assert!(
                !broadcast.hops().contains(&relay.id),
                "relay {} looped",
                relay.id
            );
        }
        // The announcements settle: nothing keeps travelling around the ring.
        runtime.advance(10 * SECOND);
        assert_eq!(
            runtime.pending_timers(),
            0,
            "traffic still in flight after 10 s"
        );

        let received = read_track(runtime, &origin, "live", "video");
        assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));
        send(&mut track, 0, "around");
        assert!(runtime.run_until(SECOND, || received.frames.borrow().len() == 1));
        assert_eq!(*received.frames.borrow(), ["around"]);

        publisher_session.close(Error::Cancel);
        assert!(
            runtime.run_until(5 * SECOND, || origin.consume_broadcast("live").is_none()),
            "the end of the broadcast reaches the subscriber"
        );
        for relay in [&first, &second, &third] {
            assert!(
                relay.origin.consume_broadcast("live").is_none(),
                "relay {}",
                relay.id
            );
        }
    });
}

#[test]
fn malformed_bytes_on_every_stream_type_close_that_session_with_the_right_code() {
    seeded(10, |runtime| {
        let mut relay = Relay::new();
        let (_p, mut track, _s, received) = live(runtime, &mut relay);

        // (what the bad client sends after its SETUP, on which kind of stream, the code)
        let cases: [(&str, bool, Vec<u8>, Error); 6] = [
            // SETUP with parameter 0x1 twice: a duplicate.
            (
                "setup",
                false,
                vec![0x01, 0x07, 0x02, 0x01, 0x01, 0x01, 0x01, 0x01, 0x02],
                Error::Duplicate,
            ),
            // ANNOUNCE_REQUEST whose prefix has 33 parts.
            (
                "announce",
                true,
                {
                    // 65 bytes of prefix: 2-byte varints for its length (0x4041) and for the
                    // message length (2 + 65 + 1 = 68, 0x4044).
                    let prefix = vec!["a"; 33].join("/");
                    let mut bytes = vec![0x01, 0x40, 0x44, 0x40, 0x41];
                    bytes.extend_from_slice(prefix.as_bytes());
                    bytes.push(0x00);
                    bytes
                },
                Error::BoundsExceeded,
            ),
            // TRACK whose name is not UTF-8.
            (
                "track",
                true,
                vec![0x06, 0x05, 0x01, b'a', 0x02, 0xc3, 0x28],
                Error::Decode,
            ),
            // SUBSCRIBE with a byte left inside its length.
            (
                "subscribe",
                true,
                vec![
                    0x02, 0x0b, 0x00, 0x01, b'a', 0x01, b'b', 0x00, 0x00, 0x00, 0x00, 0x00, 0xff,
                ],
                Error::Decode,
            ),
            // FETCH cut off by FIN.
            ("fetch", true, vec![0x03, 0x09, 0x01, b'a'], Error::Decode),
            // A GROUP header with a byte left inside its length.
            (
                "group",
                false,
                vec![0x00, 0x03, 0x00, 0x00, 0x00],
                Error::Decode,
            ),
        ];
        for (name, bidi, bytes, expected) in cases {
            let mut bad = raw_client(runtime, &mut relay);
            if name != "setup" {
                write_uni(&mut bad, SETUP);
            }
            if bidi {
                write_bidi(&mut bad, &bytes);
            } else {
                write_uni(&mut bad, &bytes);
            }
            assert_eq!(
                close_code(runtime, &mut bad),
                Some(expected.to_code()),
                "{name}: closed with {expected:?}"
            );
        }

        // An unknown stream type resets that stream only; the session stays up.
        let mut odd = raw_client(runtime, &mut relay);
        write_uni(&mut odd, SETUP);
        write_bidi(&mut odd, &[0x07]);
        write_uni(&mut odd, &[0x02]);
        assert_eq!(
            close_code(runtime, &mut odd),
            None,
            "unknown stream types are not fatal"
        );

        // Meanwhile the good sessions kept working.
        send(&mut track, 0, "still here");
        assert!(runtime.run_until(SECOND, || received.frames.borrow().len() == 1));
        assert_eq!(*received.frames.borrow(), ["still here"]);
    });
}

/// Regression: a message's length prefix was believed, and its bytes buffered until they
/// all came (reading returns flow-control credit, so nothing else bounded it): a SETUP
/// claiming 1 GiB, then zeros, grew a server at its client's upload rate.
#[test]
fn a_message_over_the_size_limit_closes_its_session_and_no_other() {
    seeded(13, |runtime| {
        let mut relay = Relay::new();
        let (_p, mut track, _s, received) = live(runtime, &mut relay);
        let limits = SessionConfig::default();

        // A SETUP claiming 1 GiB (`01 | c0 00 00 00 40 00 00 00`), then zeros past the
        // SETUP limit.
        let mut setup = vec![0x01, 0xc0, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00];
        setup.resize(setup.len() + limits.max_setup_bytes + 1024, 0);
        let mut greedy = raw_client(runtime, &mut relay);
        write_open(&mut greedy, false, &setup);
        assert_eq!(
            close_code(runtime, &mut greedy),
            Some(Error::BoundsExceeded.to_code()),
            "an oversized SETUP closes its session"
        );

        // After SETUP, an ANNOUNCE_REQUEST claiming 1 GiB, then zeros past the message
        // limit.
        let mut announce = vec![0x01, 0xc0, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00];
        announce.resize(announce.len() + limits.max_message_bytes + 1024, 0);
        let mut greedy = raw_client(runtime, &mut relay);
        write_uni(&mut greedy, SETUP);
        write_open(&mut greedy, true, &announce);
        assert_eq!(
            close_code(runtime, &mut greedy),
            Some(Error::BoundsExceeded.to_code()),
            "an oversized control message closes its session"
        );

        // A message just under the limit is not refused for its size: a SUBSCRIBE
        // naming a long track (within the limit) is read whole.
        let name = "t".repeat(limits.max_message_bytes - 64);
        let mut body = vec![0x00]; // subscribe id 0
        body.extend_from_slice(&[0x01, b'x']); // broadcast "x"
        body.extend_from_slice(&[0x80, 0x00, 0x00, 0x00]); // name length: a 4-byte varint
        let len = name.len() as u32;
        let last = body.len() - 4;
        body[last..].copy_from_slice(&(0x8000_0000 | len).to_be_bytes());
        body.extend_from_slice(name.as_bytes());
        body.extend_from_slice(&[0x00, 0x00, 0x00, 0x00, 0x00]);
        let mut subscribe = vec![0x02];
        subscribe.extend_from_slice(&(0x8000_0000u32 | body.len() as u32).to_be_bytes());
        subscribe.extend_from_slice(&body);
        let mut patient = raw_client(runtime, &mut relay);
        write_uni(&mut patient, SETUP);
        write_open(&mut patient, true, &subscribe);
        assert_eq!(
            close_code(runtime, &mut patient),
            None,
            "a message under the limit is served (here: refused, for a missing broadcast)"
        );

        // Meanwhile the good sessions kept working.
        send(&mut track, 0, "still here");
        assert!(runtime.run_until(SECOND, || received.frames.borrow().len() == 1));
    });
}

/// Regression: a publisher's group at the largest sequence (2^62 − 1) left no room for the
/// exclusive end a SUBSCRIBE_END carries; the encode error closed every session serving the
/// track onward. Now the relay refuses that group alone, the publisher's own subscription
/// fails alone, and every session stays up.
#[test]
fn a_group_at_the_largest_sequence_fails_only_its_own_subscription() {
    seeded(14, |runtime| {
        let mut relay = Relay::new();
        let (publisher_session, mut track, subscriber_session, received) =
            live(runtime, &mut relay);
        let (_other_session, _other_broadcast, mut other) =
            publisher(runtime, &mut relay, "other", "chat");

        let mut group = track.create_group((1 << 62) - 1);
        group.write(0, "the last sequence there is");
        group.finish();
        track.finish();
        assert!(
            runtime.run_until(SECOND, || received.end.borrow().is_some()),
            "the track ends for its subscriber, one way or another"
        );
        runtime.advance(SECOND);
        assert!(
            !publisher_session.is_closed(),
            "the publisher's session stays up"
        );
        assert!(
            !subscriber_session.is_closed(),
            "the subscriber's session stays up"
        );
        assert!(relay.sessions.iter().all(|session| !session.is_closed()));

        // And the relay goes on serving: another track reaches the same subscriber.
        let (_s, origin) = subscriber(runtime, &mut relay);
        assert!(runtime.run_until(SECOND, || origin.consume_broadcast("other").is_some()));
        let more = read_track(runtime, &origin, "other", "chat");
        assert!(runtime.run_until(SECOND, || other.consumer_count() > 0));
        send(&mut other, 0, "still here");
        assert!(runtime.run_until(SECOND, || more.frames.borrow().len() == 1));
    });
}

/// Regression: on raw QUIC a server waited for its client's SETUP forever, so connections
/// that never sent one held their session slots (10,000 of them locked everyone out).
#[test]
fn a_client_that_never_sends_setup_is_closed_after_the_setup_timeout() {
    seeded(15, |runtime| {
        let mut relay = Relay::new();
        let (_p, mut track, _s, received) = live(runtime, &mut relay);
        let timeout = SessionConfig::default().setup_timeout;

        let mut silent = raw_client(runtime, &mut relay);
        runtime.advance(timeout - SECOND);
        assert_eq!(
            close_code(runtime, &mut silent),
            None,
            "not before its time"
        );
        runtime.advance(SECOND);
        assert_eq!(
            close_code(runtime, &mut silent),
            Some(Error::Timeout.to_code()),
            "closed once its time is up"
        );

        // A client that sent SETUP in time is not bound by it.
        let mut prompt = raw_client(runtime, &mut relay);
        write_uni(&mut prompt, SETUP);
        runtime.advance(timeout * 3);
        assert_eq!(close_code(runtime, &mut prompt), None);

        send(&mut track, 0, "still here");
        assert!(runtime.run_until(SECOND, || received.frames.borrow().len() == 1));
    });
}

#[test]
fn a_group_older_than_the_max_latency_is_dropped_on_the_way() {
    seeded(11, |runtime| {
        let mut relay = Relay::new();
        let origin = Origin::new();
        let broadcast = BroadcastProducer::new();
        let mut properties = Track::new("video");
        properties.max_latency = Duration::from_millis(1000);
        let mut track = broadcast.create_track(properties);
        origin.publish("live", &broadcast).unwrap();
        let _publisher = relay.connect(
            runtime,
            SessionConfig {
                publish: Some(origin),
                ..SessionConfig::default()
            },
        );
        let (_s, seen) = subscriber(runtime, &mut relay);
        assert!(runtime.run_until(SECOND, || seen.consume_broadcast("live").is_some()));
        let received = read_track(runtime, &seen, "live", "video");
        assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));

        // Group 1 (at 5 s) is published before group 0 (at 0 s), which is then 5 s older
        // than the newest group: past the track's 1 s max latency.
        let mut newer = track.create_group(1);
        newer.write(5_000, "new");
        newer.finish();
        let mut older = track.create_group(0);
        older.write(0, "stale");
        older.finish();
        let mut next = track.create_group(2);
        next.write(5_033, "next");
        next.finish();
        assert!(runtime.run_until(SECOND, || received.frames.borrow().len() == 2));
        runtime.advance(SECOND);
        assert_eq!(
            *received.frames.borrow(),
            ["new", "next"],
            "the stale group never arrives"
        );
    });
}

/// Runs a publisher → relay → subscriber session over a faulty link and returns what the
/// subscriber saw and when, as text.
fn faulty_run(seed: u64) -> Vec<String> {
    let runtime = TestRuntime::new(seed, epoch());
    let faults = LinkConfig {
        latency: Duration::from_millis(30),
        bandwidth: Some(2_000_000),
        reorder: Duration::from_millis(20),
        reset_probability: 0.05,
        ..LinkConfig::default()
    };
    let relay_origin = Origin::new();
    let relay_config = SessionConfig {
        publish: Some(relay_origin.clone()),
        subscribe: Some(relay_origin.clone()),
        ..SessionConfig::default()
    };
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new();
    let mut track = broadcast.create_track(Track::new("video"));
    origin.publish("live", &broadcast).unwrap();
    let (a, b) = runtime.connect(faults.clone());
    let _publisher = session::connect(
        runtime.clone(),
        a,
        SessionConfig {
            publish: Some(origin),
            ..SessionConfig::default()
        },
    );
    let _relay_a = session::accept(runtime.clone(), b, relay_config.clone());
    let (c, d) = runtime.connect(faults);
    let seen = Origin::new();
    let _subscriber = session::connect(
        runtime.clone(),
        c,
        SessionConfig {
            subscribe: Some(seen.clone()),
            ..SessionConfig::default()
        },
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
        let (a, b) = runtime.connect(LinkConfig {
            drop_after: Some(2 * SECOND),
            ..LinkConfig::default()
        });
        let publisher = session::connect(
            runtime.clone(),
            a,
            SessionConfig {
                publish: Some(origin),
                ..SessionConfig::default()
            },
        );
        let relay = session::accept(
            runtime.clone(),
            b,
            SessionConfig {
                subscribe: Some(relay_origin.clone()),
                ..SessionConfig::default()
            },
        );
        assert!(runtime.run_until(SECOND, || relay_origin.consume_broadcast("live").is_some()));
        assert!(runtime.run_until(5 * SECOND, || publisher.is_closed() && relay.is_closed()));
        assert!(relay_origin.consume_broadcast("live").is_none());
        let waiter = kio::Waiter::new(std::task::Waker::noop());
        assert_eq!(
            relay.poll_closed(&waiter),
            std::task::Poll::Ready(Error::Transport)
        );
    });
}

#[test]
fn after_goaway_the_peer_opens_no_new_streams_but_keeps_the_old_ones() {
    seeded(15, |runtime| {
        let mut relay = Relay::new();
        let origin = Origin::new();
        let broadcast = BroadcastProducer::new();
        let mut video = broadcast.create_track(Track::new("video"));
        let _audio = broadcast.create_track(Track::new("audio"));
        origin.publish("live", &broadcast).unwrap();
        let _publisher = relay.connect(
            runtime,
            SessionConfig {
                publish: Some(origin),
                ..SessionConfig::default()
            },
        );
        let (_s, seen) = subscriber(runtime, &mut relay);
        assert!(runtime.run_until(SECOND, || seen.consume_broadcast("live").is_some()));
        let received = read_track(runtime, &seen, "live", "video");
        assert!(runtime.run_until(SECOND, || video.consumer_count() > 0));

        // The relay's session with the subscriber says GOAWAY (a relay shutting down).
        relay.sessions[1].goaway("https://elsewhere.example/");
        runtime.advance(SECOND);
        let late = read_track(runtime, &seen, "live", "audio");
        assert!(runtime.run_until(SECOND, || late.end.borrow().is_some()));
        assert_eq!(
            *late.end.borrow(),
            Some(Err(Error::NotFound)),
            "no new subscription"
        );

        send(&mut video, 0, "still flowing");
        assert!(runtime.run_until(SECOND, || received.frames.borrow().len() == 1));
    });
}

#[test]
fn the_server_sees_the_clients_setup_path_and_the_handle_sees_stats() {
    seeded(16, |runtime| {
        let mut relay = Relay::new();
        let client = relay.connect(
            runtime,
            SessionConfig {
                path: Some("/room/123?jwt=abc".into()),
                ..SessionConfig::default()
            },
        );
        assert!(runtime.run_until(SECOND, || relay.sessions[0].peer_setup().is_some()));
        let setup = relay.sessions[0].peer_setup().expect("arrived");
        assert_eq!(setup.path.as_deref(), Some("/room/123?jwt=abc"));
        assert_eq!(
            client.peer_setup().and_then(|s| s.path),
            None,
            "a server sends no path"
        );
        assert!(client.stats().bytes_sent > 0);
        assert!(relay.sessions[0].stats().bytes_received > 0);
    });
}

#[test]
fn subscribe_update_reprioritizes_groups_in_flight() {
    use moq_net::coding::{Message, Subscribe, SubscribeUpdate, Version};
    use moq_net::transport::{SendStream, Session as _};
    seeded(17, |runtime| {
        let mut relay = Relay::new();
        let (_p, _b, mut track) = publisher(runtime, &mut relay, "live", "video");
        let mut raw = raw_client(runtime, &mut relay);
        write_uni(&mut raw, SETUP);
        assert!(runtime.run_until(SECOND, || relay.origin.consume_broadcast("live").is_some()));

        // SUBSCRIBE at priority 1, on a bidi stream kept open for the update.
        let waiter = kio::Waiter::new(std::task::Waker::noop());
        let std::task::Poll::Ready(Ok((mut send, recv))) = raw.poll_open_bidi(&waiter) else {
            panic!("the test transport opens at once");
        };
        std::mem::forget(recv);
        let mut bytes = vec![0x02];
        Subscribe {
            id: 0,
            broadcast: moq_net::model::Path::new("live"),
            track: "video".into(),
            priority: 1,
            ordered: false,
            max_latency: Duration::from_secs(5),
            start: None,
            end: None,
        }
        .encode(&mut bytes, Version::Lite05)
        .unwrap();
        let _ = send.poll_write(&waiter, &mut Bytes::from(bytes));
        assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));

        // The subscriber priority of the group streams in flight to the client (uni stream
        // ids have bit 1 set).
        let group_priority = |raw: &moq_net::runtime::test::TestTransport| {
            raw.peer_priorities()
                .into_iter()
                .find(|(id, _)| id & 2 != 0)
                .map(|(_, priority)| priority.subscriber)
        };
        // A group stays open, so its stream to the client stays in flight.
        let mut group = track.append_group();
        group.write(0, "streaming");
        assert!(runtime.run_until(SECOND, || group_priority(&raw).is_some()));
        assert_eq!(
            group_priority(&raw),
            Some(1),
            "sent at the subscriber's priority"
        );

        let mut update = Vec::new();
        SubscribeUpdate {
            priority: 200,
            ordered: false,
            max_latency: Duration::from_secs(5),
            start: None,
            end: None,
        }
        .encode(&mut update, Version::Lite05)
        .unwrap();
        let _ = send.poll_write(&waiter, &mut Bytes::from(update));
        assert!(
            runtime.run_until(SECOND, || group_priority(&raw) == Some(200)),
            "the stream in flight takes the new priority"
        );
        group.finish();
    });
}

#[test]
fn fetch_returns_a_cached_group_and_not_found_for_one_that_is_gone() {
    use moq_net::coding::{Fetch, GroupDecoder, GroupItem, Message, Version};
    use moq_net::transport::{RecvStream, SendStream, Session as _};
    seeded(18, |runtime| {
        let origin = Origin::new();
        let broadcast = BroadcastProducer::new();
        let mut track = broadcast.create_track(Track::new("video"));
        origin.publish("live", &broadcast).unwrap();
        // The publisher itself is the raw client's peer: FETCH is served from its cache.
        let (raw_end, server_end) = runtime.connect(LinkConfig::default());
        let _server = session::accept(
            runtime.clone(),
            server_end,
            SessionConfig {
                publish: Some(origin),
                ..SessionConfig::default()
            },
        );
        let mut raw = raw_end;
        write_uni(&mut raw, SETUP);
        let mut group = track.append_group();
        group.write(1000, "hello");
        group.write(1033, "world");
        group.finish();

        let fetch = |raw: &mut moq_net::runtime::test::TestTransport, sequence: u64| {
            let waiter = kio::Waiter::new(std::task::Waker::noop());
            let std::task::Poll::Ready(Ok((mut send, recv))) = raw.poll_open_bidi(&waiter) else {
                panic!("the test transport opens at once");
            };
            let mut bytes = vec![0x03];
            Fetch {
                broadcast: moq_net::model::Path::new("live"),
                track: "video".into(),
                priority: 0,
                group: sequence,
            }
            .encode(&mut bytes, Version::Lite05)
            .unwrap();
            let _ = send.poll_write(&waiter, &mut Bytes::from(bytes));
            let _ = send.finish();
            recv
        };
        let read_all = |runtime: &TestRuntime, mut recv: moq_net::runtime::test::TestRecvStream| {
            let waiter = kio::Waiter::new(std::task::Waker::noop());
            let mut bytes = Vec::new();
            let mut outcome = None;
            runtime.run_until(SECOND, || {
                loop {
                    match recv.poll_read(&waiter) {
                        std::task::Poll::Ready(Ok(Some(chunk))) => bytes.extend_from_slice(&chunk),
                        std::task::Poll::Ready(Ok(None)) => {
                            outcome = Some(Ok(()));
                            return true;
                        }
                        std::task::Poll::Ready(Err(error)) => {
                            outcome = Some(Err(error));
                            return true;
                        }
                        std::task::Poll::Pending => return false,
                    }
                }
            });
            (bytes, outcome)
        };

        let (body, outcome) = read_all(runtime, fetch(&mut raw, 0));
        assert_eq!(outcome, Some(Ok(())));
        // The reply is bare FRAMEs: decode them behind a synthetic GROUP header.
        let mut decoder = GroupDecoder::new(Version::Lite05, 1 << 20);
        decoder.push(&[0x02, 0x00, 0x00]);
        decoder.push(&body);
        let mut frames = Vec::new();
        while let Some(item) = decoder.next_item().unwrap() {
            if let GroupItem::Frame { timestamp, payload } = item {
                frames.push((timestamp, payload));
            }
        }
        assert_eq!(
            frames,
            [
                (Some(1000), Bytes::from("hello")),
                (Some(1033), Bytes::from("world"))
            ]
        );

        let (_, missing) = read_all(runtime, fetch(&mut raw, 7));
        assert_eq!(
            missing,
            Some(Err(moq_net::transport::StreamError::Reset(
                Error::NotFound.to_code()
            )))
        );
    });
}

#[test]
fn the_session_handle_is_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<Session>();
    shared::<SessionConfig>();
}

#[test]
fn a_publisher_told_to_go_away_keeps_delivering_its_running_subscriptions() {
    seeded(19, |runtime| {
        let mut relay = Relay::new();
        let (_p, mut track, _s, received) = live(runtime, &mut relay);
        // The relay's session with the publisher (the first it accepted) says GOAWAY.
        relay.sessions[0].goaway("");
        runtime.advance(SECOND);
        send(&mut track, 0, "after goaway");
        assert!(runtime.run_until(SECOND, || received.frames.borrow().len() == 1));
    });
}

/// A relay draining on shutdown: GOAWAY, then a close. (The bug this flow once hit, the
/// machine no longer watching its handle after the GOAWAY, shows only when nothing else
/// wakes the machine: `moq-tokio/tests/loopback.rs` pins it over real sockets.)
#[test]
fn a_close_requested_after_a_goaway_closes_both_ends() {
    seeded(20, |runtime| {
        let mut relay = Relay::new();
        let (publisher, _track, _s, _received) = live(runtime, &mut relay);
        relay.sessions[0].goaway("");
        runtime.advance(SECOND);
        relay.sessions[0].close(Error::Cancel);
        assert!(runtime.run_until(SECOND, || relay.sessions[0].is_closed()));
        assert!(runtime.run_until(SECOND, || publisher.is_closed()));
    });
}

#[test]
fn bidi_streams_that_arrive_before_the_clients_setup_are_served_once_it_arrives() {
    use moq_net::coding::{AnnounceOk, AnnounceRequest, Message, Version};
    use moq_net::transport::{RecvStream, SendStream, Session as _};
    seeded(20, |runtime| {
        let mut relay = Relay::new();
        let mut raw = raw_client(runtime, &mut relay);
        let waiter = kio::Waiter::new(std::task::Waker::noop());
        // ANNOUNCE_REQUEST first, SETUP after it.
        let std::task::Poll::Ready(Ok((mut send, mut recv))) = raw.poll_open_bidi(&waiter) else {
            panic!("the test transport opens at once");
        };
        let mut bytes = vec![0x01];
        AnnounceRequest {
            prefix: moq_net::model::Path::root(),
            exclude_hop: 0,
        }
        .encode(&mut bytes, Version::Lite05)
        .unwrap();
        let _ = send.poll_write(&waiter, &mut Bytes::from(bytes));
        runtime.advance(Duration::from_millis(50));
        write_uni(&mut raw, SETUP);

        let mut reply = Vec::new();
        assert!(runtime.run_until(SECOND, || {
            while let std::task::Poll::Ready(Ok(Some(chunk))) = recv.poll_read(&waiter) {
                reply.extend_from_slice(&chunk);
            }
            !reply.is_empty()
        }));
        let ok = AnnounceOk::decode(&mut &reply[..], Version::Lite05).unwrap();
        assert_eq!(ok.active_count, 0);
    });
}

#[test]
fn announce_ok_counts_exactly_the_announces_sent_after_exclusions() {
    use moq_net::coding::{Announce, AnnounceOk, AnnounceRequest, Message, Version};
    use moq_net::transport::{RecvStream, SendStream, Session as _};
    seeded(21, |runtime| {
        let mut relay = Relay::new();
        // One broadcast came through origin 77, one is local.
        let through = BroadcastProducer::new();
        through.set_hops(vec![77]);
        relay.origin.publish("via", &through).unwrap();
        let local = BroadcastProducer::new();
        relay.origin.publish("here", &local).unwrap();

        let mut raw = raw_client(runtime, &mut relay);
        write_uni(&mut raw, SETUP);
        let waiter = kio::Waiter::new(std::task::Waker::noop());
        let std::task::Poll::Ready(Ok((mut send, mut recv))) = raw.poll_open_bidi(&waiter) else {
            panic!("the test transport opens at once");
        };
        // The requester is origin 77: the route through it must not be offered.
        let mut bytes = vec![0x01];
        AnnounceRequest {
            prefix: moq_net::model::Path::root(),
            exclude_hop: 77,
        }
        .encode(&mut bytes, Version::Lite05)
        .unwrap();
        let _ = send.poll_write(&waiter, &mut Bytes::from(bytes));
        let mut reply = Vec::new();
        runtime.run_until(SECOND, || {
            while let std::task::Poll::Ready(Ok(Some(chunk))) = recv.poll_read(&waiter) {
                reply.extend_from_slice(&chunk);
            }
            false
        });
        let mut cursor = &reply[..];
        let ok = AnnounceOk::decode(&mut cursor, Version::Lite05).unwrap();
        assert_eq!(ok.active_count, 1, "only the local broadcast");
        let announce = Announce::decode(&mut cursor, Version::Lite05).unwrap();
        assert_eq!(announce.suffix.as_str(), "here");
        assert!(cursor.is_empty(), "nothing else was announced");
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
