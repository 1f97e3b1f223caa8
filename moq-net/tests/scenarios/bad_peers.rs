//! Peers that break the protocol or its bounds: malformed bytes, oversized messages, the
//! largest group sequence, a missing SETUP, groups older than the latency bound.

use std::time::Duration;

use moqx_net::Error;
use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::session::SessionConfig;

use crate::common::relay::*;
use crate::common::seeded;

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
        let limits = SessionConfig::default().limits;

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
        let timeout = SessionConfig::default().limits.setup_timeout;

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
        let _publisher = relay.connect(runtime, SessionConfig::default().with_publisher(&origin));
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
