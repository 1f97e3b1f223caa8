//! Delivery through a relay: frames, late joiners, subscribers leaving and coming back,
//! publishers ending and leaving, a thousand subscribers, ten thousand broadcasts, a ring of
//! relays.

use std::time::Duration;

use moqx_net::Error;
use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::session::{Session, SessionConfig};

use crate::common::relay::*;
use crate::common::seeded;

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
    use moqx_net::coding::Version;
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
                let at_version = |config: SessionConfig| config.with_version(version);
                let publisher_origin = Origin::new();
                let broadcast = BroadcastProducer::new();
                let mut track = broadcast.create_track(Track::new("video"));
                publisher_origin.publish("live", &broadcast).unwrap();
                let _publisher = relay.connect(
                    runtime,
                    at_version(SessionConfig::default().with_publisher(&publisher_origin)),
                );
                let origin = Origin::new();
                let viewer = relay.connect(
                    runtime,
                    at_version(SessionConfig::default().with_subscriber(&origin)),
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
        let _publisher = relay.connect(runtime, SessionConfig::default().with_publisher(&origin));
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
