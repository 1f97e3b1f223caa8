//! A session's life: GOAWAY and close, the SETUP path and stats the handle shows, bidi
//! streams before SETUP, ANNOUNCE_OK's count.

use std::time::Duration;

use bytes::Bytes;
use moqx_net::Error;
use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::session::{Session, SessionConfig};

use crate::common::relay::*;
use crate::common::seeded;

#[test]
fn after_goaway_the_peer_opens_no_new_streams_but_keeps_the_old_ones() {
    seeded(15, |runtime| {
        let mut relay = Relay::new();
        let origin = Origin::new();
        let broadcast = BroadcastProducer::new();
        let mut video = broadcast.create_track(Track::new("video"));
        let _audio = broadcast.create_track(Track::new("audio"));
        origin.publish("live", &broadcast).unwrap();
        let _publisher = relay.connect(runtime, SessionConfig::default().with_publisher(&origin));
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
fn the_server_sees_the_clients_setup_path_and_the_handle_sees_stats() {
    seeded(16, |runtime| {
        let mut relay = Relay::new();
        let client = relay.connect(runtime, {
            let mut session_config = SessionConfig::default();
            session_config.path = Some("/room/123?jwt=abc".into());
            session_config
        });
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
fn the_session_handle_is_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<Session>();
    shared::<SessionConfig>();
}

#[test]
fn bidi_streams_that_arrive_before_the_clients_setup_are_served_once_it_arrives() {
    use moqx_net::coding::{AnnounceOk, AnnounceRequest, Message, Version};
    use moqx_net::transport::{RecvStream, SendStream, Session as _};
    seeded(20, |runtime| {
        let mut relay = Relay::new();
        let mut raw = raw_client(runtime, &mut relay);
        let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
        // ANNOUNCE_REQUEST first, SETUP after it.
        let std::task::Poll::Ready(Ok((mut send, mut recv))) = raw.poll_open_bidi(&waiter) else {
            panic!("the test transport opens at once");
        };
        let mut bytes = vec![0x01];
        AnnounceRequest {
            prefix: moqx_net::model::Path::root(),
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
    use moqx_net::coding::{Announce, AnnounceOk, AnnounceRequest, Message, Version};
    use moqx_net::transport::{RecvStream, SendStream, Session as _};
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
        let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
        let std::task::Poll::Ready(Ok((mut send, mut recv))) = raw.poll_open_bidi(&waiter) else {
            panic!("the test transport opens at once");
        };
        // The requester is origin 77: the route through it must not be offered.
        let mut bytes = vec![0x01];
        AnnounceRequest {
            prefix: moqx_net::model::Path::root(),
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
