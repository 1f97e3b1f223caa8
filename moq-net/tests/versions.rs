//! What each version does differently on the wire, seen by a hand-driven raw peer against a
//! relay in virtual time: a -04 session that starts without SETUP, answers SUBSCRIBE with
//! SUBSCRIBE_OK before any group, writes frames without timestamps, announces without
//! ANNOUNCE_OK and with its own hop appended, and never announces a path twice; a -06
//! session that closes on an END for an announcement never started.

mod common;

use std::task::{Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use common::relay::*;
use common::seeded;
use moqx_kio::Waiter;
use moqx_net::coding::{
    Announce, AnnounceOk, AnnounceRequest, AnnounceStatus, Message, Subscribe, SubscribeResponse,
    TypedAnnounce, Version,
};
use moqx_net::model::{BroadcastProducer, Path};
use moqx_net::runtime::test::{TestRecvStream, TestRuntime, TestTransport};
use moqx_net::transport::{RecvStream, SendStream, Session as _};

const SECOND: Duration = Duration::from_secs(1);

/// A raw client of `relay` speaking `version` (as if the connection negotiated it).
fn raw_at(runtime: &TestRuntime, relay: &mut Relay, version: Version) -> TestTransport {
    relay.base.version = version;
    relay.link.protocol = Some(version.alpn().to_owned());
    raw_client(runtime, relay)
}

/// Opens a bidi stream, writes `bytes`, keeps it open; its receive half.
fn request(raw: &mut TestTransport, bytes: Vec<u8>) -> TestRecvStream {
    let waiter = Waiter::new(Waker::noop());
    let Poll::Ready(Ok((mut send, recv))) = raw.poll_open_bidi(&waiter) else {
        panic!("the test transport opens at once");
    };
    let _ = send.poll_write(&waiter, &mut Bytes::from(bytes));
    std::mem::forget(send); // kept open: the request stays live
    recv
}

/// Everything `recv` received within a second of virtual time (or until `enough`).
fn read_all(
    runtime: &TestRuntime,
    recv: &mut TestRecvStream,
    enough: impl Fn(&[u8]) -> bool,
) -> Vec<u8> {
    let waiter = Waiter::new(Waker::noop());
    let mut bytes = Vec::new();
    runtime.run_until(SECOND, || {
        while let Poll::Ready(Ok(Some(chunk))) = recv.poll_read(&waiter) {
            bytes.extend_from_slice(&chunk);
        }
        enough(&bytes)
    });
    bytes
}

/// A -04 SUBSCRIBE stream for `live`/`video`: the stream type, then SUBSCRIBE with `id`
/// at `priority`, unordered, 1 s, from the latest group, open-ended.
fn subscribe_live(id: u64, priority: u8) -> Vec<u8> {
    let mut bytes = vec![0x02];
    Subscribe {
        id,
        broadcast: Path::new("live"),
        track: "video".into(),
        priority,
        ordered: false,
        max_latency: Duration::from_secs(1),
        start: None,
        end: None,
    }
    .encode(&mut bytes, Version::Lite04)
    .unwrap();
    bytes
}

fn announce_request(version: Version) -> Vec<u8> {
    let mut bytes = vec![0x01];
    AnnounceRequest {
        prefix: Path::root(),
        exclude_hop: 0,
    }
    .encode(&mut bytes, version)
    .unwrap();
    bytes
}

#[test]
fn a_lite04_session_needs_no_setup_and_answers_subscribe_with_ok_before_any_group() {
    seeded(41, |runtime| {
        let mut relay = Relay::new();
        let (_p, _b, mut track) = publisher(runtime, &mut relay, "live", "video");
        assert!(runtime.run_until(SECOND, || relay.origin.consume_broadcast("live").is_some()));
        let mut raw = raw_at(runtime, &mut relay, Version::Lite04);
        // No SETUP: the SUBSCRIBE is served at once.
        let mut responses = request(&mut raw, subscribe_live(7, 3));
        let reply = read_all(runtime, &mut responses, |bytes| !bytes.is_empty());
        assert_eq!(
            SubscribeResponse::decode(&mut &reply[..], Version::Lite04),
            Ok(SubscribeResponse::Ok {
                priority: 3,
                ordered: false,
                max_latency: Duration::from_secs(1),
                start: None,
                end: None,
            }),
            "SUBSCRIBE_OK first, as a deployed -04 subscriber waits for"
        );

        // A group: its frames carry no timestamp.
        let mut group = track.append_group();
        group.write(1000, "hello");
        group.finish();
        let waiter = Waiter::new(Waker::noop());
        let mut stream = None;
        runtime.run_until(SECOND, || {
            if let Poll::Ready(Ok(accepted)) = raw.poll_accept_uni(&waiter) {
                stream = Some(accepted);
            }
            stream.is_some()
        });
        let mut stream = stream.expect("a group stream");
        let bytes = read_all(runtime, &mut stream, |bytes| bytes.len() >= 10);
        // Type 0, GROUP (length 2: id 7, sequence 0), then size 5 and the payload alone.
        assert_eq!(bytes, b"\x00\x02\x07\x00\x05hello");
        track.finish();
    });
}

#[test]
fn a_lite04_announce_stream_has_no_ok_the_relay_appends_its_hop_and_never_repeats_a_path() {
    seeded(42, |runtime| {
        let mut relay = Relay::with_id(9);
        let first = BroadcastProducer::new();
        relay.origin.publish("live", &first).unwrap();
        let mut raw = raw_at(runtime, &mut relay, Version::Lite04);
        let mut announces = request(&mut raw, announce_request(Version::Lite04));
        let bytes = read_all(runtime, &mut announces, |bytes| !bytes.is_empty());
        let mut cursor = &bytes[..];
        assert_eq!(
            Announce::decode(&mut cursor, Version::Lite04),
            Ok(Announce {
                status: AnnounceStatus::Active,
                suffix: Path::new("live"),
                hops: vec![9],
            }),
            "no ANNOUNCE_OK; the sender's own id appended"
        );
        assert!(cursor.is_empty());

        // Another broadcast takes the path: a deployed -04 receiver closes the session on
        // a second active, so it hears an end, then the new one.
        let second = BroadcastProducer::new();
        relay.origin.publish("live", &second).unwrap();
        let bytes = read_all(runtime, &mut announces, |bytes| bytes.len() >= 16);
        let mut cursor = &bytes[..];
        let end = Announce::decode(&mut cursor, Version::Lite04).unwrap();
        let again = Announce::decode(&mut cursor, Version::Lite04).unwrap();
        assert_eq!(
            (end.status, again.status),
            (AnnounceStatus::Ended, AnnounceStatus::Active)
        );
        assert!(cursor.is_empty());
        drop(first);
    });
}

#[test]
fn a_lite03_announce_carries_a_hop_count() {
    seeded(43, |runtime| {
        let mut relay = Relay::with_id(9);
        let broadcast = BroadcastProducer::new();
        broadcast.set_hops(vec![4]);
        relay.origin.publish("live", &broadcast).unwrap();
        let mut raw = raw_at(runtime, &mut relay, Version::Lite03);
        let mut announces = request(&mut raw, announce_request(Version::Lite03));
        let bytes = read_all(runtime, &mut announces, |bytes| !bytes.is_empty());
        // Length 7, active, "live", two hops (the route's and the relay's own), no ids.
        assert_eq!(bytes, b"\x07\x01\x04live\x02");
    });
}

#[test]
fn on_lite06_an_end_for_an_announcement_never_started_closes_the_session() {
    seeded(44, |runtime| {
        let mut relay = Relay::new();
        let mut raw = raw_at(runtime, &mut relay, Version::Lite06Wip);
        write_uni(&mut raw, SETUP);
        // The relay asks the client for its announcements; the client answers with an
        // END for an id it never gave.
        let mut send = announce_to_relay(runtime, &mut raw);
        announce(&mut send, TypedAnnounce::End { id: 3 });
        assert_eq!(
            close_code(runtime, &mut raw),
            Some(moqx_net::Error::ProtocolViolation.to_code())
        );
    });
}

#[test]
fn on_lite06_a_broadcast_taking_an_announced_path_is_an_end_then_a_start() {
    seeded(45, |runtime| {
        let mut relay = Relay::with_id(9);
        let mut raw = raw_at(runtime, &mut relay, Version::Lite06Wip);
        write_uni(&mut raw, SETUP);
        let first = BroadcastProducer::new();
        first.set_hops(vec![1, 2]);
        relay.origin.publish("a", &first).unwrap();
        let mut announces = request(&mut raw, announce_request(Version::Lite06Wip));
        let bytes = read_all(runtime, &mut announces, |bytes| bytes.len() >= 4);
        let mut cursor = &bytes[..];
        let ok = AnnounceOk::decode(&mut cursor, Version::Lite06Wip).unwrap();
        assert_eq!((ok.hop_id, ok.active_count), (9, 1));
        assert_eq!(
            TypedAnnounce::decode(&mut cursor, Version::Lite06Wip),
            Ok(TypedAnnounce::Start {
                suffix: Path::new("a"),
                hops: vec![1, 2],
                cost: 2,
            })
        );
        // Another broadcast takes the path (by a shorter route): as deployed peers send a
        // replacement, the old announcement ends (id 0) and the new one starts (id 1). A
        // RESTART would tell the receiver to keep the old broadcast's state.
        let second = BroadcastProducer::new();
        second.set_hops(vec![4]);
        relay.origin.publish("a", &second).unwrap();
        drop(first);
        let bytes = read_all(runtime, &mut announces, |bytes| bytes.len() >= 8);
        let mut cursor = &bytes[..];
        assert_eq!(
            TypedAnnounce::decode(&mut cursor, Version::Lite06Wip),
            Ok(TypedAnnounce::End { id: 0 })
        );
        assert_eq!(
            TypedAnnounce::decode(&mut cursor, Version::Lite06Wip),
            Ok(TypedAnnounce::Start {
                suffix: Path::new("a"),
                hops: vec![4],
                cost: 1,
            })
        );
        assert!(cursor.is_empty());
    });
}

/// The relay's announce request to a raw -06 client, answered with ANNOUNCE_OK (hop 5);
/// the send half to announce on.
fn announce_to_relay(
    runtime: &TestRuntime,
    raw: &mut TestTransport,
) -> moqx_net::runtime::test::TestSendStream {
    announce_to_relay_at(runtime, raw, Version::Lite06Wip)
}

/// [`announce_to_relay`] at `version`.
fn announce_to_relay_at(
    runtime: &TestRuntime,
    raw: &mut TestTransport,
    version: Version,
) -> moqx_net::runtime::test::TestSendStream {
    let waiter = Waiter::new(Waker::noop());
    let mut asked = None;
    runtime.run_until(SECOND, || {
        if let Poll::Ready(Ok(streams)) = raw.poll_accept_bidi(&waiter) {
            asked = Some(streams);
        }
        asked.is_some()
    });
    let (mut send, recv) = asked.expect("the relay's announce request");
    std::mem::forget(recv);
    let ok = AnnounceOk {
        hop_id: 5,
        active_count: 0,
    }
    .to_vec(version)
    .unwrap();
    let _ = send.poll_write(&waiter, &mut Bytes::from(ok));
    send
}

/// Writes `message` on `send`.
fn announce(send: &mut moqx_net::runtime::test::TestSendStream, message: TypedAnnounce) {
    let waiter = Waiter::new(Waker::noop());
    let bytes = message.to_vec(Version::Lite06Wip).unwrap();
    let _ = send.poll_write(&waiter, &mut Bytes::from(bytes));
}

#[test]
fn on_lite06_a_restart_changes_the_route_of_the_same_broadcast() {
    seeded(48, |runtime| {
        let mut relay = Relay::with_id(9);
        let mut raw = raw_at(runtime, &mut relay, Version::Lite06Wip);
        write_uni(&mut raw, SETUP);
        let mut send = announce_to_relay(runtime, &mut raw);
        announce(
            &mut send,
            TypedAnnounce::Start {
                suffix: Path::new("a"),
                hops: vec![],
                cost: 0,
            },
        );
        assert!(runtime.run_until(SECOND, || relay.origin.consume_broadcast("a").is_some()));
        let before = relay.origin.consume_broadcast("a").unwrap();
        assert_eq!(before.hops(), [5]);
        announce(
            &mut send,
            TypedAnnounce::Restart {
                id: 0,
                hops: vec![3],
                cost: 1,
            },
        );
        assert!(
            runtime.run_until(SECOND, || before.hops() == [3, 5]),
            "the new route"
        );
        let after = relay.origin.consume_broadcast("a").unwrap();
        assert!(
            after.same_broadcast(&before),
            "the same broadcast: subscriptions to it go on"
        );
    });
}

#[test]
fn on_lite06_a_second_start_for_a_path_not_ended_closes_the_session() {
    seeded(49, |runtime| {
        let mut relay = Relay::new();
        let mut raw = raw_at(runtime, &mut relay, Version::Lite06Wip);
        write_uni(&mut raw, SETUP);
        let mut send = announce_to_relay(runtime, &mut raw);
        for _ in 0..2 {
            announce(
                &mut send,
                TypedAnnounce::Start {
                    suffix: Path::new("a"),
                    hops: vec![],
                    cost: 0,
                },
            );
        }
        assert_eq!(
            close_code(runtime, &mut raw),
            Some(moqx_net::Error::Duplicate.to_code())
        );
    });
}

/// Regression (review): before -05 the subscribe stream's FIN is the end of the track to a
/// deployed subscriber, which finishes the track at the highest group it has seen: the FIN
/// must wait until the last group's stream is out.
#[test]
fn a_lite04_subscription_ends_only_once_its_last_group_stream_is_open() {
    seeded(50, |runtime| {
        let mut relay = Relay::new();
        let (_p, _b, mut track) = publisher(runtime, &mut relay, "live", "video");
        assert!(runtime.run_until(SECOND, || relay.origin.consume_broadcast("live").is_some()));
        // The raw client lets the relay open one uni stream: a second group waits.
        relay.link.max_uni_streams = Some(1);
        let mut raw = raw_at(runtime, &mut relay, Version::Lite04);
        let mut responses = request(&mut raw, subscribe_live(0, 0));
        assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));
        for text in ["one", "two"] {
            let mut group = track.append_group();
            group.write(0, text);
            group.finish();
        }
        track.finish();
        let waiter = Waiter::new(Waker::noop());
        let mut finished = false;
        runtime.run_until(SECOND, || {
            loop {
                match responses.poll_read(&waiter) {
                    Poll::Ready(Ok(Some(_))) => continue,
                    Poll::Ready(Ok(None)) => finished = true,
                    _ => {}
                }
                break;
            }
            finished
        });
        assert!(
            !finished,
            "no FIN while the second group's stream cannot open"
        );
    });
}

#[test]
fn on_lite06_a_restart_of_an_announcement_dropped_for_a_loop_publishes_it() {
    seeded(46, |runtime| {
        let mut relay = Relay::with_id(9);
        let mut raw = raw_at(runtime, &mut relay, Version::Lite06Wip);
        write_uni(&mut raw, SETUP);
        let mut send = announce_to_relay(runtime, &mut raw);
        // "a" first comes through the relay itself (a loop: dropped), then by a route
        // that does not: the RESTART publishes it.
        announce(
            &mut send,
            TypedAnnounce::Start {
                suffix: Path::new("a"),
                hops: vec![9],
                cost: 1,
            },
        );
        runtime.run_until(Duration::from_millis(200), || false);
        assert!(
            relay.origin.consume_broadcast("a").is_none(),
            "a loop is dropped"
        );
        announce(
            &mut send,
            TypedAnnounce::Restart {
                id: 0,
                hops: vec![],
                cost: 0,
            },
        );
        assert!(
            runtime.run_until(SECOND, || relay.origin.consume_broadcast("a").is_some()),
            "restarted by a route that does not loop"
        );
    });
}

/// Regression (review): -06 keeps the path of every START it dropped (a RESTART may bring
/// it back), which a peer could grow without bound by announcing loops; those paths count
/// against `max_announce_path_bytes` like published ones.
#[test]
fn on_lite06_dropped_announcements_count_against_the_path_bytes_bound() {
    seeded(47, |runtime| {
        let mut config = moqx_net::session::SessionConfig::default();
        config.limits.max_announce_path_bytes = 100;
        let mut relay = Relay::with_config(config);
        relay.id = 9;
        let mut raw = raw_at(runtime, &mut relay, Version::Lite06Wip);
        write_uni(&mut raw, SETUP);
        let mut send = announce_to_relay(runtime, &mut raw);
        // Two looped announcements of 60-byte paths: 120 bytes held, over the 100.
        for name in ["a", "b"] {
            announce(
                &mut send,
                TypedAnnounce::Start {
                    suffix: Path::new(name.repeat(60)),
                    hops: vec![9],
                    cost: 1,
                },
            );
        }
        assert_eq!(
            close_code(runtime, &mut raw),
            Some(moqx_net::Error::BoundsExceeded.to_code())
        );
    });
}

/// Found peering with the deployed relay on -06: it re-announces a broadcast whose
/// publisher it cannot name (hop 0) at a new cost once it carries it (RESTART). Passed on
/// as an END and a START, a downstream subscriber dropped the broadcast, and the TRACK
/// it had asked for came back "not found". The same route re-priced is a RESTART.
#[test]
fn on_lite06_an_unnamed_publishers_route_re_priced_is_a_restart() {
    seeded(50, |runtime| {
        let mut relay = Relay::with_id(9);
        let mut raw = raw_at(runtime, &mut relay, Version::Lite06Wip);
        write_uni(&mut raw, SETUP);
        let broadcast = BroadcastProducer::new();
        let route = |cost| moqx_net::model::Route {
            hops: vec![0, 7],
            cost,
        };
        broadcast.set_route(route(1));
        relay.origin.publish("a", &broadcast).unwrap();
        let mut announces = request(&mut raw, announce_request(Version::Lite06Wip));
        let bytes = read_all(runtime, &mut announces, |bytes| bytes.len() >= 4);
        let mut cursor = &bytes[..];
        AnnounceOk::decode(&mut cursor, Version::Lite06Wip).unwrap();
        assert_eq!(
            TypedAnnounce::decode(&mut cursor, Version::Lite06Wip),
            Ok(TypedAnnounce::Start {
                suffix: Path::new("a"),
                hops: vec![0, 7],
                cost: 1,
            })
        );
        broadcast.set_route(route(0));
        let bytes = read_all(runtime, &mut announces, |bytes| !bytes.is_empty());
        let mut cursor = &bytes[..];
        assert_eq!(
            TypedAnnounce::decode(&mut cursor, Version::Lite06Wip),
            Ok(TypedAnnounce::Restart {
                id: 0,
                hops: vec![0, 7],
                cost: 0,
            })
        );
        assert!(cursor.is_empty(), "nothing else: no END, no START");
    });
}

/// The -05 form of the same: a second ANNOUNCE of the same hops, from a publisher nobody
/// named (hop 0), keeps the broadcast (and the TRACK and SUBSCRIBE requests on it); other
/// hops are another broadcast taking the path.
#[test]
fn on_lite05_an_unnamed_publishers_route_announced_again_keeps_the_broadcast() {
    seeded(51, |runtime| {
        let mut relay = Relay::with_id(9);
        let mut raw = raw_at(runtime, &mut relay, Version::Lite05);
        write_uni(&mut raw, SETUP);
        let mut send = announce_to_relay_at(runtime, &mut raw, Version::Lite05);
        let waiter = Waiter::new(Waker::noop());
        let mut announce = |path: &str, hops: Vec<u64>| {
            let bytes = Announce {
                status: AnnounceStatus::Active,
                suffix: Path::new(path),
                hops,
            }
            .to_vec(Version::Lite05)
            .unwrap();
            let _ = send.poll_write(&waiter, &mut Bytes::from(bytes));
        };
        announce("a", vec![0]);
        assert!(runtime.run_until(SECOND, || relay.origin.consume_broadcast("a").is_some()));
        let before = relay.origin.consume_broadcast("a").unwrap();
        assert_eq!(before.hops(), [0, 5]);
        // Announcements are taken in order: once "b" is in, the repeat of "a" was read.
        announce("a", vec![0]);
        announce("b", vec![]);
        assert!(runtime.run_until(SECOND, || relay.origin.consume_broadcast("b").is_some()));
        let again = relay.origin.consume_broadcast("a").unwrap();
        assert!(
            again.same_broadcast(&before),
            "the same route: the same broadcast"
        );
        assert!(!before.is_closed());

        announce("a", vec![0, 3]);
        assert!(runtime.run_until(SECOND, || {
            relay
                .origin
                .consume_broadcast("a")
                .is_some_and(|b| b.hops() == [0, 3, 5])
        }));
        let other = relay.origin.consume_broadcast("a").unwrap();
        assert!(
            !other.same_broadcast(&before),
            "another route: another broadcast"
        );
    });
}
