//! Whole sessions in the test runtime: publisher → relay → subscribers, in virtual time.
//!
//! Each test runs with a seed (`MOQ_TEST_SEED` replays one) and prints it when it fails.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use moq_net::Error;
use moq_net::model::{BroadcastProducer, Origin, Track, TrackProducer};
use moq_net::runtime::test::{LinkConfig, TestRuntime, seeded};
use moq_net::session::{self, Session, SessionConfig};

/// A relay: server sessions whose halves share one origin.
struct Relay {
    origin: Origin,
    sessions: Vec<Session>,
    id: u64,
}

impl Relay {
    fn new() -> Self {
        Self::with_id(0)
    }

    /// A relay with an origin (hop) id, for routes through several relays.
    fn with_id(id: u64) -> Self {
        Self {
            origin: Origin::new(),
            sessions: Vec::new(),
            id,
        }
    }

    /// How this relay's sessions are configured: both halves on the shared origin.
    fn config(&self) -> SessionConfig {
        SessionConfig {
            publish: Some(self.origin.clone()),
            subscribe: Some(self.origin.clone()),
            origin_id: self.id,
            ..SessionConfig::default()
        }
    }

    /// Connects `other` to this relay as a client: each forwards the other's broadcasts.
    fn link(&mut self, runtime: &TestRuntime, other: &mut Relay) {
        let (client_end, relay_end) = runtime.connect(LinkConfig::default());
        self.sessions
            .push(session::accept(runtime.clone(), relay_end, self.config()));
        other.sessions.push(session::connect(
            runtime.clone(),
            client_end,
            other.config(),
        ));
    }

    /// Connects a client to this relay; the client's config says what it publishes and
    /// where it puts what it receives.
    fn connect(&mut self, runtime: &TestRuntime, client: SessionConfig) -> Session {
        let (client_end, relay_end) = runtime.connect(LinkConfig::default());
        self.sessions
            .push(session::accept(runtime.clone(), relay_end, self.config()));
        session::connect(runtime.clone(), client_end, client)
    }
}

/// A publisher client with one broadcast at `path` and one track `name`.
fn publisher(
    runtime: &TestRuntime,
    relay: &mut Relay,
    path: &str,
    name: &str,
) -> (Session, BroadcastProducer, TrackProducer) {
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new();
    let track = broadcast.create_track(Track::new(name));
    origin.publish(path, &broadcast);
    let session = relay.connect(
        runtime,
        SessionConfig {
            publish: Some(origin),
            ..SessionConfig::default()
        },
    );
    (session, broadcast, track)
}

/// A subscriber client; returns its session and the origin it fills.
fn subscriber(runtime: &TestRuntime, relay: &mut Relay) -> (Session, Origin) {
    let origin = Origin::new();
    let session = relay.connect(
        runtime,
        SessionConfig {
            subscribe: Some(origin.clone()),
            ..SessionConfig::default()
        },
    );
    (session, origin)
}

/// What a reading task saw: every frame, and how the track ended.
#[derive(Clone, Default)]
struct Received {
    frames: Rc<RefCell<Vec<Bytes>>>,
    end: Rc<RefCell<Option<Result<(), Error>>>>,
}

/// Spawns a task that reads every frame of `path`/`name` from `origin`.
fn read_track(runtime: &TestRuntime, origin: &Origin, path: &str, name: &str) -> Received {
    let received = Received::default();
    let (frames, end) = (received.frames.clone(), received.end.clone());
    let broadcast = origin.consume_broadcast(path).expect("announced");
    let name = name.to_owned();
    let (frames_out, end_out) = (frames, end);
    runtime.spawn_task(async move {
        let mut track = match broadcast.subscribe_track(&name).await {
            Ok(track) => track,
            Err(error) => {
                *end_out.borrow_mut() = Some(Err(error));
                return;
            }
        };
        let outcome = loop {
            match track.next_group().await {
                Ok(Some(mut group)) => {
                    while let Ok(Some(frame)) = group.read_frame().await {
                        frames_out.borrow_mut().push(frame.payload);
                    }
                }
                Ok(None) => break Ok(()),
                Err(error) => break Err(error),
            }
        };
        *end_out.borrow_mut() = Some(outcome);
    });
    received
}

const SECOND: Duration = Duration::from_secs(1);

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

/// Writes a one-frame group.
fn send(track: &mut TrackProducer, timestamp: u64, text: &'static str) {
    let mut group = track.append_group();
    group.write(timestamp, text);
    group.finish();
}

/// A relay, a publisher of `live`/`video`, and a subscriber already reading it.
fn live(runtime: &TestRuntime, relay: &mut Relay) -> (Session, TrackProducer, Session, Received) {
    let (publisher_session, broadcast, track) = publisher(runtime, relay, "live", "video");
    std::mem::forget(broadcast); // published for the whole test
    let (subscriber_session, origin) = subscriber(runtime, relay);
    assert!(runtime.run_until(SECOND, || origin.consume_broadcast("live").is_some()));
    let received = read_track(runtime, &origin, "live", "video");
    assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));
    (publisher_session, track, subscriber_session, received)
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

        // The subscriber goes away: the relay's copy becomes unused and it unsubscribes.
        subscriber_session.close(Error::Cancel);
        assert!(
            runtime.run_until(SECOND, || track.consumer_count() == 0),
            "the publisher's track is no longer consumed"
        );
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
                origin.publish(format!("rooms/{i}"), &broadcast);
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
