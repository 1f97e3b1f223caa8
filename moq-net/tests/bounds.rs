//! What one peer can make a relay's session hold, in virtual time: each bound of
//! [`SessionConfig`] refuses the peer past it with its wire code, while the relay's other
//! sessions keep delivering.
//!
//! Each test pins a finding of the hostile-peer review: before its bound, the peer grew
//! the relay without limit.

mod common;

use std::time::Duration;

use common::relay::*;
use common::seeded;
use moqx_net::Error;
use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::runtime::test::{LinkConfig, TestRuntime};
use moqx_net::session::{Authorize, Origins, Session, SessionConfig};

/// A client publishing `paths` (one track `chat` each) to `relay`, as hop `origin_id`.
fn announcer(
    runtime: &TestRuntime,
    relay: &mut Relay,
    paths: &[String],
    origin_id: u64,
) -> (Session, Vec<BroadcastProducer>) {
    let origin = Origin::new();
    let broadcasts: Vec<BroadcastProducer> = paths
        .iter()
        .map(|path| {
            let broadcast = BroadcastProducer::new();
            origin.publish(path.as_str(), &broadcast).unwrap();
            broadcast
        })
        .collect();
    let session = relay.connect(runtime, {
        let mut session_config = SessionConfig::default();
        session_config.publish = Some(origin);
        session_config.origin_id = origin_id;
        session_config
    });
    (session, broadcasts)
}

/// The code a session ended with, once it did (within a second).
fn ended(runtime: &TestRuntime, session: &Session) -> Option<Error> {
    runtime.run_until(SECOND, || session.is_closed());
    session.is_closed().then(|| {
        let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
        match session.poll_closed(&waiter) {
            std::task::Poll::Ready(error) => error,
            std::task::Poll::Pending => unreachable!("closed"),
        }
    })
}

/// Regression: announcements were unbounded; each one is an origin entry, a route and a
/// sub-machine on the relay. Past either bound the announcing session closes alone.
#[test]
fn announcing_past_the_sessions_bounds_closes_that_session_and_no_other() {
    seeded(21, |runtime| {
        let mut relay = Relay::with_config({
            let mut session_config = SessionConfig::default();
            session_config.limits.max_announces = 3;
            session_config.limits.max_announce_path_bytes = 64;
            session_config
        });
        let (_p, mut track, _s, received) = live(runtime, &mut relay);

        let three: Vec<String> = (0..3).map(|i| format!("few/{i}")).collect();
        let (within, _kept) = announcer(runtime, &mut relay, &three, 0);
        let four: Vec<String> = (0..4).map(|i| format!("many/{i}")).collect();
        let (too_many, _dropped) = announcer(runtime, &mut relay, &four, 0);
        let long = vec!["x".repeat(65)];
        let (too_long, _long) = announcer(runtime, &mut relay, &long, 0);

        assert_eq!(ended(runtime, &too_many), Some(Error::BoundsExceeded));
        assert_eq!(ended(runtime, &too_long), Some(Error::BoundsExceeded));
        assert_eq!(
            ended(runtime, &within),
            None,
            "three announcements are within"
        );
        assert_eq!(relay.origin.paths("few").len(), 3);
        assert!(
            relay.origin.paths("many").is_empty(),
            "the refused session's broadcasts are gone with it"
        );

        send(&mut track, 0, "still here");
        assert!(runtime.run_until(SECOND, || received.frames.borrow().len() == 1));
    });
}

/// A TRACK request: stream type 6, then the broadcast and track names.
fn track_request(broadcast: &str, track: &str) -> Vec<u8> {
    let mut body = vec![broadcast.len() as u8];
    body.extend_from_slice(broadcast.as_bytes());
    body.push(track.len() as u8);
    body.extend_from_slice(track.as_bytes());
    let mut bytes = vec![0x06, body.len() as u8];
    bytes.extend_from_slice(&body);
    bytes
}

/// Regression: TRACK and FETCH requests were not counted against `max_subscriptions`, so a
/// peer could keep any number waiting on tracks that never resolve.
#[test]
fn track_requests_count_against_the_sessions_request_bound() {
    seeded(22, |runtime| {
        let mut relay = Relay::with_config({
            let mut session_config = SessionConfig::default();
            session_config.limits.max_subscriptions = 2;
            session_config
        });
        // A broadcast whose tracks are asked for and never answered: each TRACK waits.
        let silent = BroadcastProducer::on_demand();
        relay.origin.publish("silent", &silent).unwrap();

        let mut client = raw_client(runtime, &mut relay);
        let session = relay.sessions.last().unwrap().clone();
        write_uni(&mut client, SETUP);
        for name in ["a", "b", "c", "d"] {
            write_open(&mut client, true, &track_request("silent", name));
        }
        runtime.advance(SECOND);
        let counters = session.counters();
        assert_eq!(counters.subscriptions_refused, 2, "two over the bound");
        assert_eq!(counters.subscriptions_active, 2, "two held while they wait");
        assert!(!session.is_closed(), "refusing a request is not fatal");
    });
}

/// Regression: announce streams were unbounded; each one is an origin listener with its
/// own queue of every change under its prefix.
#[test]
fn announce_streams_past_the_bound_are_refused_on_their_own_stream() {
    seeded(23, |runtime| {
        let mut relay = Relay::with_config({
            let mut session_config = SessionConfig::default();
            session_config.limits.max_announce_requests = 2;
            session_config
        });
        let mut client = raw_client(runtime, &mut relay);
        let session = relay.sessions.last().unwrap().clone();
        write_uni(&mut client, SETUP);
        for _ in 0..5 {
            // ANNOUNCE_REQUEST: type 1, length 2, empty prefix, exclude hop 0.
            write_open(&mut client, true, &[0x01, 0x02, 0x00, 0x00]);
        }
        runtime.advance(SECOND);
        assert_eq!(session.counters().announce_requests_refused, 3);
        assert!(!session.is_closed());
    });
}

/// Regression: a subscriber that gives no stream credit (MAX_STREAMS_UNI never raised)
/// made the relay queue every group it was sent. Now the oldest are dropped, counted, and
/// the queue stays at its bound.
#[test]
fn a_subscriber_that_gives_no_stream_credit_loses_its_oldest_groups() {
    seeded(24, |runtime| {
        let mut relay = Relay::with_config({
            let mut session_config = SessionConfig::default();
            session_config.limits.max_queued_groups = 8;
            session_config
        });
        let (_publisher, _broadcast, mut track) = publisher(runtime, &mut relay, "live", "chat");
        // The subscriber lets the relay open one uni stream: its SETUP.
        relay.link = {
            let mut link_config = LinkConfig::default();
            link_config.max_uni_streams = Some(1);
            link_config
        };
        let (_subscriber, origin) = subscriber(runtime, &mut relay);
        let toward_subscriber = relay.sessions.last().unwrap().clone();
        assert!(runtime.run_until(SECOND, || origin.consume_broadcast("live").is_some()));
        let received = read_track(runtime, &origin, "live", "chat");
        assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));

        for i in 0..1000u64 {
            send(&mut track, i, "message");
            runtime.advance(Duration::from_millis(1));
        }
        runtime.advance(SECOND);
        let counters = toward_subscriber.counters();
        assert_eq!(
            counters.groups_dropped,
            1000 - 8,
            "all but the newest eight were dropped"
        );
        assert!(received.frames.borrow().is_empty(), "nothing could be sent");
        assert!(!toward_subscriber.is_closed());
    });
}

/// Regression: a group kept every frame it received, and the cache keeps the newest group,
/// so one group that never ends was stored whole. Past the bound the group is refused
/// alone; the publisher's next group flows.
#[test]
fn a_group_past_the_group_bounds_is_refused_and_the_next_one_flows() {
    seeded(25, |runtime| {
        let mut relay = Relay::with_config({
            let mut session_config = SessionConfig::default();
            session_config.limits.max_group_frames = 4;
            session_config.limits.max_group_bytes = 1000;
            session_config
        });
        let (publisher_session, mut track, subscriber_session, received) =
            live(runtime, &mut relay);
        let toward_publisher = relay.sessions[0].clone();

        let mut endless = track.append_group();
        for _ in 0..10 {
            endless.write(0, "frame");
        }
        runtime.advance(SECOND);
        let mut large = track.append_group();
        large.write(0, vec![0u8; 1001]);
        large.finish();
        runtime.advance(SECOND);
        assert_eq!(toward_publisher.counters().groups_refused, 2);
        let partial = received.frames.borrow().len();
        assert!(
            partial <= 4,
            "at most the frames within the bound: {partial}"
        );

        send(&mut track, 0, "next");
        assert!(runtime.run_until(SECOND, || {
            received
                .frames
                .borrow()
                .last()
                .is_some_and(|frame| frame == "next")
        }));
        assert!(!publisher_session.is_closed() && !subscriber_session.is_closed());
        drop(endless);
    });
}

/// Regression: a token was checked only at connect, so a 60-second token held a session
/// forever. The hook's `valid_for` ends the session with Unauthorized when it runs out.
#[test]
fn a_session_closes_with_unauthorized_when_its_authorization_runs_out() {
    seeded(26, |runtime| {
        let relay_origin = Origin::new();
        let hook_origin = relay_origin.clone();
        let mut relay = Relay::with_config(SessionConfig::default().with_authorize(
            Authorize::new(move |_setup| {
                Ok(Origins {
                    publish: Some(hook_origin.clone()),
                    subscribe: Some(hook_origin.clone()),
                    valid_for: Some(Duration::from_secs(60)),
                    ..Origins::default()
                })
            }),
        ));
        relay.origin = relay_origin;
        let (client, _origin) = subscriber(runtime, &mut relay);
        assert!(runtime.run_until(SECOND, || client.peer_setup().is_some()));
        runtime.advance(Duration::from_secs(58));
        assert!(!client.is_closed(), "valid for a minute");
        runtime.advance(Duration::from_secs(2));
        assert_eq!(ended(runtime, &client), Some(Error::Unauthorized));

        // Without a hook (WebTransport decides at CONNECT), the config says it.
        let mut relay = Relay::with_config({
            let mut session_config = SessionConfig::default();
            session_config.valid_for = Some(Duration::from_secs(5));
            session_config
        });
        let (client, _origin) = subscriber(runtime, &mut relay);
        runtime.advance(Duration::from_secs(4));
        assert!(!client.is_closed());
        runtime.advance(Duration::from_secs(2));
        assert_eq!(ended(runtime, &client), Some(Error::Unauthorized));
    });
}

/// Which of two publishers of `shared` a subscriber is served by, on a relay that does or
/// does not trust its clients' routes: the squatter (claiming a direct route) publishes
/// first, the owner (whose route is one hop, its own id) second.
fn served_by(runtime: &TestRuntime, trust_peer_routes: bool) -> &'static str {
    let mut relay = Relay::with_config({
        let mut session_config = SessionConfig::default();
        session_config.trust_peer_routes = trust_peer_routes;
        session_config
    });
    let squatter_origin = Origin::new();
    let squatter = BroadcastProducer::new();
    let mut squatter_track = squatter.create_track(Track::new("chat"));
    squatter_origin.publish("shared", &squatter).unwrap();
    let _squatter_session = relay.connect(
        runtime,
        SessionConfig::default().with_publisher(&squatter_origin),
    );
    assert!(runtime.run_until(SECOND, || {
        relay.origin.consume_broadcast("shared").is_some()
    }));
    runtime.advance(SECOND);

    let owner_origin = Origin::new();
    let owner = BroadcastProducer::new();
    let mut owner_track = owner.create_track(Track::new("chat"));
    owner_origin.publish("shared", &owner).unwrap();
    let _owner_session = relay.connect(runtime, {
        let mut session_config = SessionConfig::default();
        session_config.publish = Some(owner_origin);
        session_config.origin_id = 5;
        session_config
    });
    runtime.advance(SECOND);

    let (_subscriber, origin) = subscriber(runtime, &mut relay);
    assert!(runtime.run_until(SECOND, || origin.consume_broadcast("shared").is_some()));
    let received = read_track(runtime, &origin, "shared", "chat");
    runtime.run_until(SECOND, || {
        owner_track.consumer_count() > 0 || squatter_track.consumer_count() > 0
    });
    send(&mut owner_track, 0, "owner");
    send(&mut squatter_track, 0, "squatter");
    assert!(runtime.run_until(SECOND, || !received.frames.borrow().is_empty()));
    if received.frames.borrow()[0] == "owner" {
        "owner"
    } else {
        "squatter"
    }
}

/// Regression: a client announcing a path with a shorter claimed route than its owner's
/// kept the path, even against the owner announcing it again. On a relay that does not
/// trust its clients' routes every client counts as direct, and the newest publisher of a
/// path is served (the README's rule for taking over a path).
#[test]
fn a_client_cannot_hold_a_path_by_claiming_a_shorter_route() {
    seeded(27, |runtime| {
        assert_eq!(served_by(runtime, true), "squatter", "trusted routes rank");
        assert_eq!(served_by(runtime, false), "owner", "untrusted: the newest");
    });
}

/// Review finding: the group bounds were per stream, so a publisher keeping many group
/// streams open at once could make the session hold their product. The session's bound on
/// unfinished groups together refuses the group that would pass it; once groups finish,
/// their bytes are given back.
#[test]
fn unfinished_groups_together_are_bounded_and_finishing_gives_bytes_back() {
    seeded(28, |runtime| {
        let mut relay = Relay::with_config({
            let mut session_config = SessionConfig::default();
            session_config.limits.max_receiving_group_bytes = 100;
            session_config
        });
        let (_p, mut track, _s, received) = live(runtime, &mut relay);
        let toward_publisher = relay.sessions[0].clone();

        let mut first = track.append_group();
        first.write(0, vec![b'a'; 60]);
        runtime.advance(SECOND);
        let mut second = track.append_group();
        second.write(0, vec![b'b'; 60]);
        runtime.advance(SECOND);
        assert_eq!(
            toward_publisher.counters().groups_refused,
            1,
            "60 + 60 bytes unfinished pass 100"
        );
        first.finish();
        drop(second);
        runtime.advance(SECOND);
        let mut third = track.append_group();
        third.write(0, vec![b'c'; 60]);
        third.finish();
        assert!(runtime.run_until(SECOND, || {
            received
                .frames
                .borrow()
                .iter()
                .any(|frame| frame[0] == b'c')
        }));
        assert_eq!(toward_publisher.counters().groups_refused, 1);
    });
}
