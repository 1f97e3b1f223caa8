//! One origin, two protocols, in virtual time: a moq-lite publisher's broadcast reaches a
//! moq-transport subscriber of the same relay, every draft, seen by a hand-driven raw peer
//! (SUBSCRIBE answered SUBSCRIBE_OK, each group a subgroup stream of objects, PUBLISH_DONE
//! at the track's end, a missing track refused DOES_NOT_EXIST, UNSUBSCRIBE honoured).

mod common;

use std::task::{Poll, Waker};
use std::time::Duration;

use bytes::{Buf, Bytes};
use common::moqt::RawStream as Stream;
use common::relay::raw_client;
use common::seeded;
use moqx_kio::Waiter;
use moqx_net::coding::Version;
use moqx_net::moqt::{
    ClientSetup, Control, Draft, Location, Namespace, Publication, PublishDone, PublishNamespace,
    PublishNamespaceDone, PublishNamespaceOk, RequestError, RequestOk, SetupOptions,
    SubgroupHeader, SubgroupObjects, Subscribe, SubscribeError, SubscribeOk, TrackStatus,
    TrackStatusError, TrackStatusOk, Unsubscribe,
};
use moqx_net::runtime::test::{TestRuntime, TestTransport};
use moqx_net::sim::{Relay, publisher};
use moqx_net::transport::{RecvStream, SendStream, Session as _};

const SECOND: Duration = Duration::from_secs(1);

/// A raw client of `relay` on `version`, its SETUP exchanged: the transport, its control
/// stream.
fn moqt_client(
    runtime: &TestRuntime,
    relay: &mut Relay,
    version: Version,
) -> (TestTransport, Stream) {
    let draft = version.draft().unwrap();
    relay.base.version = version;
    relay.link.protocol = Some(version.alpn().to_owned());
    let mut raw = raw_client(runtime, relay);
    let setup = ClientSetup {
        versions: match draft {
            Draft::D14 => vec![draft.version_number()],
            _ => vec![],
        },
        options: SetupOptions {
            max_request_id: (draft != Draft::D18).then_some(100),
            ..SetupOptions::default()
        },
    };
    let mut control = Stream::open_control(&mut raw, draft, &setup);
    control.next(runtime, &mut raw).expect("the relay's SETUP");
    (raw, control)
}

/// Sends SUBSCRIBE `request_id` for `namespace`/`name`: on the control stream (14, 16) or
/// a request stream of its own (18), whose replies then come on it.
fn subscribe(
    raw: &mut TestTransport,
    control: &mut Stream,
    request_id: u64,
    namespace: &[&str],
    name: &str,
) -> Option<Stream> {
    let message = Subscribe {
        request_id,
        namespace: Namespace::from_strs(namespace.iter().copied()),
        name: Bytes::copy_from_slice(name.as_bytes()),
        ..Subscribe::default()
    };
    if control.draft != Draft::D18 {
        control.send(&message);
        return None;
    }
    let waiter = Waiter::new(Waker::noop());
    let Poll::Ready(Ok((send, recv))) = raw.poll_open_bidi(&waiter) else {
        panic!("opens at once")
    };
    let mut stream = Stream::new(send, Some(recv), control.draft);
    stream.send(&message);
    Some(stream)
}

/// One subgroup stream from the relay, read to its end: its header and objects.
fn next_group(
    runtime: &TestRuntime,
    raw: &mut TestTransport,
    draft: Draft,
) -> Option<(SubgroupHeader, Vec<Bytes>)> {
    let waiter = Waiter::new(Waker::noop());
    let mut stream = None;
    runtime.run_until(SECOND, || {
        if let Poll::Ready(Ok(accepted)) = raw.poll_accept_uni(&waiter) {
            stream = Some(accepted);
        }
        stream.is_some()
    });
    let mut stream = stream?;
    let mut bytes = Vec::new();
    let mut ended = false;
    runtime.run_until(SECOND, || {
        loop {
            match stream.poll_read(&waiter) {
                Poll::Ready(Ok(Some(chunk))) => bytes.extend_from_slice(&chunk),
                Poll::Ready(Ok(None)) => {
                    ended = true;
                    return true;
                }
                _ => return false,
            }
        }
    });
    assert!(ended, "the group stream ends with FIN");
    let mut cursor = &bytes[..];
    let header = SubgroupHeader::decode(&mut cursor, draft).expect("SUBGROUP_HEADER");
    let mut objects = SubgroupObjects::new(&header, draft);
    let mut payloads = Vec::new();
    let mut next_id = 0;
    while cursor.has_remaining() {
        let object = objects.decode(&mut cursor).expect("an object");
        assert_eq!(object.id, next_id, "object ids from 0, one per frame");
        next_id += 1;
        payloads.push(cursor.copy_to_bytes(object.payload_len as usize));
    }
    Some((header, payloads))
}

#[test]
fn a_moq_lite_broadcast_reaches_a_moq_transport_subscriber_on_every_draft() {
    for version in Version::MOQT {
        seeded(71, |runtime| {
            let draft = version.draft().unwrap();
            let mut relay = Relay::new();
            let (_publisher, _broadcast, mut track) =
                publisher(runtime, &mut relay, "chat/room", "messages");
            assert!(runtime.run_until(SECOND, || {
                relay.origin.consume_broadcast("chat/room").is_some()
            }));

            let (mut raw, mut control) = moqt_client(runtime, &mut relay, version);
            let mut request = subscribe(&mut raw, &mut control, 0, &["chat", "room"], "messages");
            let replies = request.as_mut().unwrap_or(&mut control);
            let reply = replies.next(runtime, &mut raw).expect("a reply");
            let ok = SubscribeOk::from_frame(&reply, draft).expect("SUBSCRIBE_OK");
            assert_eq!(
                ok.request_id,
                (draft != Draft::D18).then_some(0),
                "{version}"
            );

            let mut group = track.append_group();
            group.write(1000, "hello");
            group.write(1001, "world");
            group.finish();
            let (header, payloads) = next_group(runtime, &mut raw, draft).expect("a group");
            assert_eq!(header.track_alias, ok.track_alias, "{version}");
            assert_eq!(header.group, 0);
            assert_eq!(payloads, ["hello", "world"], "{version}");

            // The track ends: PUBLISH_DONE, TRACK_ENDED, one stream.
            track.finish();
            let replies = request.as_mut().unwrap_or(&mut control);
            let done = replies.next(runtime, &mut raw).expect("PUBLISH_DONE");
            let done = PublishDone::from_frame(&done, draft).expect("PUBLISH_DONE");
            assert_eq!((done.status, done.stream_count), (0x2, 1), "{version}");
        });
    }
}

#[test]
fn a_missing_track_is_refused_and_unsubscribe_stops_the_groups() {
    for version in Version::MOQT {
        seeded(72, |runtime| {
            let draft = version.draft().unwrap();
            let mut relay = Relay::new();
            let (_publisher, _broadcast, mut track) =
                publisher(runtime, &mut relay, "chat/room", "messages");
            assert!(runtime.run_until(SECOND, || {
                relay.origin.consume_broadcast("chat/room").is_some()
            }));
            let (mut raw, mut control) = moqt_client(runtime, &mut relay, version);

            let mut request = subscribe(
                &mut raw,
                &mut control,
                0,
                &["nonexistent", "namespace"],
                "test-track",
            );
            let replies = request.as_mut().unwrap_or(&mut control);
            let reply = replies.next(runtime, &mut raw).expect("a reply");
            let code = match draft {
                Draft::D14 => {
                    SubscribeError::from_frame(&reply, draft)
                        .expect("SUBSCRIBE_ERROR")
                        .code
                }
                _ => {
                    RequestError::from_frame(&reply, draft)
                        .expect("REQUEST_ERROR")
                        .code
                }
            };
            let does_not_exist = if draft == Draft::D14 { 0x4 } else { 0x10 };
            assert_eq!(code, does_not_exist, "{version}");

            if draft == Draft::D18 {
                return; // 18 cancels by resetting the request stream: no UNSUBSCRIBE.
            }
            subscribe(&mut raw, &mut control, 2, &["chat", "room"], "messages");
            let reply = control.next(runtime, &mut raw).expect("a reply");
            SubscribeOk::from_frame(&reply, draft).expect("SUBSCRIBE_OK");
            moqx_net::sim::send(&mut track, 1, "first");
            assert!(next_group(runtime, &mut raw, draft).is_some(), "{version}");
            control.send(&Unsubscribe { request_id: 2 });
            runtime.advance(SECOND);
            moqx_net::sim::send(&mut track, 2, "after");
            assert!(
                next_group(runtime, &mut raw, draft).is_none(),
                "{version}: unsubscribed"
            );
        });
    }
}

/// The raw publisher's side of SUBSCRIBE from the relay: on 14 and 16 read from the
/// control stream, on 18 from a request stream the relay opened (returned, its replies
/// go there).
fn subscribe_from_relay(
    runtime: &TestRuntime,
    raw: &mut TestTransport,
    control: &mut Stream,
) -> (Subscribe, Option<Stream>) {
    let draft = control.draft;
    if draft != Draft::D18 {
        let frame = control.next(runtime, raw).expect("SUBSCRIBE");
        return (
            Subscribe::from_frame(&frame, draft).expect("SUBSCRIBE"),
            None,
        );
    }
    let waiter = Waiter::new(Waker::noop());
    let mut accepted = None;
    runtime.run_until(SECOND, || {
        if let Poll::Ready(Ok(streams)) = raw.poll_accept_bidi(&waiter) {
            accepted = Some(streams);
        }
        accepted.is_some()
    });
    let (send, recv) = accepted.expect("a request stream");
    let mut stream = Stream::new(send, Some(recv), draft);
    let frame = stream.next(runtime, raw).expect("SUBSCRIBE");
    (
        Subscribe::from_frame(&frame, draft).expect("SUBSCRIBE"),
        Some(stream),
    )
}

/// Writes one group of `payloads` as subgroup 0 of the track under `alias`, then FIN.
fn write_group(raw: &mut TestTransport, draft: Draft, alias: u64, group: u64, payloads: &[&str]) {
    let waiter = Waiter::new(Waker::noop());
    let Poll::Ready(Ok(mut send)) = raw.poll_open_uni(&waiter) else {
        panic!("opens at once")
    };
    let header = SubgroupHeader {
        track_alias: alias,
        group,
        subgroup: moqx_net::moqt::SubgroupId::Zero,
        priority: Some(128),
        properties: false,
        end_of_group: true,
        first_object: draft == Draft::D18,
    };
    let mut bytes = Vec::new();
    header.encode(&mut bytes, draft).unwrap();
    let mut objects = SubgroupObjects::new(&header, draft);
    for (id, payload) in payloads.iter().enumerate() {
        let object = moqx_net::moqt::SubgroupObject {
            id: id as u64,
            payload_len: payload.len() as u64,
            ..Default::default()
        };
        objects.encode(&object, &mut bytes).unwrap();
        bytes.extend_from_slice(payload.as_bytes());
    }
    let _ = send.poll_write(&waiter, &mut Bytes::from(bytes));
    let _ = send.finish();
}

/// Also with the first group sent before SUBSCRIBE_OK (they travel on different streams,
/// and moq-dev/moq's publishers send at once): the group waits for its alias.
#[test]
fn a_moq_transport_publisher_reaches_a_moq_lite_subscriber_on_every_draft() {
    for (version, data_first) in Version::MOQT
        .into_iter()
        .flat_map(|version| [(version, false), (version, true)])
    {
        seeded(73, |runtime| {
            let draft = version.draft().unwrap();
            let mut relay = Relay::new();
            let (mut raw, mut control) = moqt_client(runtime, &mut relay, version);

            // PUBLISH_NAMESPACE, unsolicited, as deployed publishers send it.
            let announce = PublishNamespace {
                request_id: 0,
                namespace: Namespace::from_strs(["moq-test", "interop"]),
                ..PublishNamespace::default()
            };
            let mut request = match draft {
                Draft::D18 => {
                    let waiter = Waiter::new(Waker::noop());
                    let Poll::Ready(Ok((send, recv))) = raw.poll_open_bidi(&waiter) else {
                        panic!("opens at once")
                    };
                    let mut stream = Stream::new(send, Some(recv), draft);
                    stream.send(&announce);
                    Some(stream)
                }
                _ => {
                    control.send(&announce);
                    None
                }
            };
            let replies = request.as_mut().unwrap_or(&mut control);
            let reply = replies.next(runtime, &mut raw).expect("a reply");
            match draft {
                Draft::D14 => {
                    PublishNamespaceOk::from_frame(&reply, draft).expect("PUBLISH_NAMESPACE_OK");
                }
                _ => {
                    RequestOk::from_frame(&reply, draft).expect("REQUEST_OK");
                }
            }
            assert!(
                relay.origin.consume_broadcast("moq-test/interop").is_some(),
                "{version}"
            );

            // A moq-lite subscriber of the relay reads the track: the relay subscribes
            // upstream, and the publisher's objects reach it as frames.
            relay.base.version = Version::Lite05;
            relay.link.protocol = None;
            let (_subscriber, origin) = moqx_net::sim::subscriber(runtime, &mut relay);
            assert!(runtime.run_until(SECOND, || {
                origin.consume_broadcast("moq-test/interop").is_some()
            }));
            let received =
                moqx_net::sim::read_track(runtime, &origin, "moq-test/interop", "test-track");
            let (subscribe, mut subscription) =
                subscribe_from_relay(runtime, &mut raw, &mut control);
            assert_eq!(subscribe.name, "test-track", "{version}");
            if data_first {
                write_group(&mut raw, draft, 7, 0, &["hello", "world"]);
                runtime.advance(Duration::from_millis(50));
            }
            let replies = subscription.as_mut().unwrap_or(&mut control);
            replies.send(&SubscribeOk {
                request_id: (draft != Draft::D18).then_some(subscribe.request_id),
                track_alias: 7,
                group_order: (draft == Draft::D14).then_some(moqx_net::moqt::GroupOrder::Ascending),
                ..SubscribeOk::default()
            });
            runtime.advance(Duration::from_millis(10));
            if !data_first {
                write_group(&mut raw, draft, 7, 0, &["hello", "world"]);
            }
            assert!(
                runtime.run_until(SECOND, || received.len() == 2),
                "{version}, data first: {data_first}"
            );
            assert_eq!(received.texts(), ["hello", "world"], "{version}");

            // The namespace withdrawn: PUBLISH_NAMESPACE_DONE, or 18's reset stream.
            match request.as_mut() {
                Some(stream) => stream.send.reset(0x1),
                None if draft == Draft::D14 => control.send(&PublishNamespaceDone {
                    publication: Publication::Namespace(announce.namespace.clone()),
                }),
                None => control.send(&PublishNamespaceDone {
                    publication: Publication::Request(0),
                }),
            }
            assert!(
                runtime.run_until(SECOND, || relay
                    .origin
                    .consume_broadcast("moq-test/interop")
                    .is_none()),
                "{version}: withdrawn"
            );
        });
    }
}

/// A client of `relay` speaking `version`, with `config`'s roles.
fn client_at(
    runtime: &TestRuntime,
    relay: &mut Relay,
    version: Version,
    config: moqx_net::session::SessionConfig,
) -> moqx_net::session::Session {
    relay.base.version = version;
    relay.link.protocol = Some(version.alpn().to_owned());
    let mut config = config;
    config.version = version;
    relay.connect(runtime, config)
}

#[test]
fn every_pair_of_protocols_chats_through_one_relay() {
    let versions = [
        Version::Lite05,
        Version::Moqt14,
        Version::Moqt16,
        Version::Moqt18,
    ];
    for publisher_version in versions {
        for subscriber_version in versions {
            seeded(74, |runtime| {
                let pair = format!("{publisher_version} -> {subscriber_version}");
                let mut relay = Relay::new();
                let origin = moqx_net::model::Origin::new();
                let broadcast = moqx_net::model::BroadcastProducer::new();
                let mut track = broadcast.create_track(moqx_net::model::Track::new("messages"));
                origin.publish("chat/room", &broadcast).unwrap();
                let _publisher = client_at(
                    runtime,
                    &mut relay,
                    publisher_version,
                    moqx_net::session::SessionConfig::default().with_publisher(&origin),
                );
                assert!(
                    runtime.run_until(SECOND, || relay
                        .origin
                        .consume_broadcast("chat/room")
                        .is_some()),
                    "{pair}: the relay learns the broadcast"
                );
                let local = moqx_net::model::Origin::new();
                // Under a prefix: 14 cannot ask for every namespace.
                let mut config =
                    moqx_net::session::SessionConfig::default().with_subscriber(&local);
                config.subscribe_prefix = moqx_net::model::Path::new("chat");
                let _subscriber = client_at(runtime, &mut relay, subscriber_version, config);
                assert!(
                    runtime.run_until(SECOND, || local.consume_broadcast("chat/room").is_some()),
                    "{pair}: the subscriber learns the broadcast"
                );
                let received = moqx_net::sim::read_track(runtime, &local, "chat/room", "messages");
                runtime.advance(Duration::from_millis(100));
                for (index, text) in ["one", "two", "three"].into_iter().enumerate() {
                    moqx_net::sim::send(&mut track, index as u64, text);
                    runtime.advance(Duration::from_millis(10));
                }
                assert!(
                    runtime.run_until(SECOND, || received.len() == 3),
                    "{pair}: {:?}",
                    received.texts()
                );
                assert_eq!(received.texts(), ["one", "two", "three"], "{pair}");
            });
        }
    }
}

/// The session's bounds hold on moq-transport requests as on moq-lite's: a SUBSCRIBE past
/// `max_subscriptions` and (18, where no request-id grant bounds them first) a
/// SUBSCRIBE_NAMESPACE past `max_announce_requests` are refused alone (EXCESSIVE_LOAD on
/// 18, an internal error before it) and the session goes on.
#[test]
fn requests_past_the_sessions_bounds_are_refused_alone() {
    for version in [Version::Moqt16, Version::Moqt18] {
        seeded(75, |runtime| {
            let draft = version.draft().unwrap();
            let mut relay = Relay::new();
            relay.base.limits.max_subscriptions = 1;
            relay.base.limits.max_announce_requests = 1;
            let (_publisher, _broadcast, _track) =
                publisher(runtime, &mut relay, "chat/room", "messages");
            assert!(runtime.run_until(SECOND, || {
                relay.origin.consume_broadcast("chat/room").is_some()
            }));
            let (mut raw, mut control) = moqt_client(runtime, &mut relay, version);
            let excessive = if draft == Draft::D18 { 0x9 } else { 0x0 };

            let mut first = subscribe(&mut raw, &mut control, 0, &["chat", "room"], "messages");
            let reply = first
                .as_mut()
                .unwrap_or(&mut control)
                .next(runtime, &mut raw)
                .expect("a reply");
            SubscribeOk::from_frame(&reply, draft).expect("the first is served");
            let mut second = subscribe(&mut raw, &mut control, 2, &["chat", "room"], "messages");
            let reply = second
                .as_mut()
                .unwrap_or(&mut control)
                .next(runtime, &mut raw)
                .expect("a reply");
            let error = RequestError::from_frame(&reply, draft).expect("the second is refused");
            assert_eq!(error.code, excessive, "{version}");

            if draft != Draft::D18 {
                // On 16 the grant bounds requests first: this window (two requests) is
                // spent.
                runtime.advance(SECOND);
                assert_eq!(
                    common::relay::close_code(runtime, &mut raw),
                    None,
                    "{version}"
                );
                return;
            }
            let waiter = Waiter::new(Waker::noop());
            for (request_id, expect_ok) in [(4, true), (6, false)] {
                let Poll::Ready(Ok((send, recv))) = raw.poll_open_bidi(&waiter) else {
                    panic!("opens at once")
                };
                let mut stream = Stream::new(send, Some(recv), draft);
                stream.send(&moqx_net::moqt::SubscribeNamespace {
                    request_id,
                    prefix: Namespace::from_strs(["chat"]),
                    options: (draft == Draft::D16)
                        .then_some(moqx_net::moqt::SubscribeOptions::Namespace),
                    ..Default::default()
                });
                let reply = stream.next(runtime, &mut raw).expect("a reply");
                match expect_ok {
                    true => {
                        RequestOk::from_frame(&reply, draft).expect("the first is answered");
                    }
                    false => {
                        let error = RequestError::from_frame(&reply, draft).expect("refused");
                        assert_eq!(error.code, excessive, "{version}");
                    }
                }
                std::mem::forget(stream); // kept open: the request stays live
            }
            runtime.advance(SECOND);
            assert_eq!(
                common::relay::close_code(runtime, &mut raw),
                None,
                "{version}: the session goes on"
            );
        });
    }
}

/// Draft 14's text asks a namespace prefix for at least one field, but deployed relays
/// send a SUBSCRIBE_NAMESPACE with none (moq-dev/moq's, to every draft-14 client): read
/// as every namespace, it is answered and every namespace published follows.
#[test]
fn a_draft_14_subscribe_namespace_with_no_fields_learns_every_namespace() {
    seeded(76, |runtime| {
        let draft = Draft::D14;
        let mut relay = Relay::new();
        let (_publisher, _broadcast, _track) =
            publisher(runtime, &mut relay, "chat/room", "messages");
        assert!(runtime.run_until(SECOND, || {
            relay.origin.consume_broadcast("chat/room").is_some()
        }));
        let (mut raw, mut control) = moqt_client(runtime, &mut relay, Version::Moqt14);
        control.send(&moqx_net::moqt::SubscribeNamespace {
            request_id: 0,
            ..Default::default()
        });
        let reply = control.next(runtime, &mut raw).expect("a reply");
        moqx_net::moqt::SubscribeNamespaceOk::from_frame(&reply, draft).expect("answered");
        let announced = control.next(runtime, &mut raw).expect("an announcement");
        let announced = PublishNamespace::from_frame(&announced, draft).expect("PUBLISH_NAMESPACE");
        assert_eq!(announced.namespace, Namespace::from_strs(["chat", "room"]));
        assert_eq!(common::relay::close_code(runtime, &mut raw), None);
    });
}

/// TRACK_STATUS is answered as its draft says (14: TRACK_STATUS_OK on the control stream;
/// 16: REQUEST_OK there; 18: REQUEST_OK on the request's stream, which then ends) with the
/// track's largest location as the relay holds it (another subscriber reads the track),
/// the start of its latest group; a track the publisher does not have is refused
/// DOES_NOT_EXIST; no objects are sent and the session goes on.
#[test]
fn track_status_is_answered_with_the_largest_location() {
    for version in Version::MOQT {
        seeded(77, |runtime| {
            let draft = version.draft().unwrap();
            let mut relay = Relay::new();
            let (_publisher, _broadcast, mut track) =
                publisher(runtime, &mut relay, "chat/room", "messages");
            assert!(runtime.run_until(SECOND, || {
                relay.origin.consume_broadcast("chat/room").is_some()
            }));
            // A moq-lite subscriber reads the track: the relay holds its groups.
            let local = moqx_net::model::Origin::new();
            let _subscriber = client_at(
                runtime,
                &mut relay,
                Version::Lite05,
                moqx_net::session::SessionConfig::default().with_subscriber(&local),
            );
            assert!(runtime.run_until(SECOND, || local.consume_broadcast("chat/room").is_some()));
            let received = moqx_net::sim::read_track(runtime, &local, "chat/room", "messages");
            runtime.advance(Duration::from_millis(100));
            for index in 0..3 {
                moqx_net::sim::send(&mut track, index, "hello");
                runtime.advance(Duration::from_millis(10));
            }
            assert!(runtime.run_until(SECOND, || received.len() == 3));
            let (mut raw, mut control) = moqt_client(runtime, &mut relay, version);
            for (request_id, name, served) in [(0, "messages", true), (2, "nothing", false)] {
                let request = TrackStatus {
                    request_id,
                    namespace: Namespace::from_strs(["chat", "room"]),
                    name: Bytes::copy_from_slice(name.as_bytes()),
                    ..TrackStatus::default()
                };
                let mut own = None;
                if draft == Draft::D18 {
                    let waiter = Waiter::new(Waker::noop());
                    let Poll::Ready(Ok((send, recv))) = raw.poll_open_bidi(&waiter) else {
                        panic!("opens at once")
                    };
                    let mut stream = Stream::new(send, Some(recv), draft);
                    stream.send(&request);
                    own = Some(stream);
                } else {
                    control.send(&request);
                }
                let replies = own.as_mut().unwrap_or(&mut control);
                let reply = replies.next(runtime, &mut raw).expect("a reply");
                if !served {
                    let code = match draft {
                        Draft::D14 => {
                            TrackStatusError::from_frame(&reply, draft)
                                .expect("TRACK_STATUS_ERROR")
                                .code
                        }
                        _ => {
                            RequestError::from_frame(&reply, draft)
                                .expect("REQUEST_ERROR")
                                .code
                        }
                    };
                    // DOES_NOT_EXIST: 14's TRACK_STATUS_ERROR code, REQUEST_ERROR's after.
                    let does_not_exist = if draft == Draft::D14 { 0x4 } else { 0x10 };
                    assert_eq!(code, does_not_exist, "{version}");
                    continue;
                }
                let largest = match draft {
                    Draft::D14 => {
                        let ok = TrackStatusOk::from_frame(&reply, draft).expect("TRACK_STATUS_OK");
                        assert_eq!(ok.request_id, Some(request_id));
                        ok.parameters.largest_object
                    }
                    _ => {
                        let ok = RequestOk::from_frame(&reply, draft).expect("REQUEST_OK");
                        assert_eq!(ok.request_id, draft.has_reply_request_ids().then_some(0));
                        ok.parameters.largest_object
                    }
                };
                assert_eq!(
                    largest,
                    Some(Location {
                        group: 2,
                        object: 0
                    }),
                    "{version}"
                );
                if let Some(stream) = own.as_mut() {
                    assert!(stream.ended(runtime), "{version}: the stream ends");
                }
            }
            let waiter = Waiter::new(Waker::noop());
            runtime.advance(SECOND);
            assert!(
                !matches!(raw.poll_accept_uni(&waiter), Poll::Ready(Ok(_))),
                "{version}: no objects"
            );
            assert_eq!(
                common::relay::close_code(runtime, &mut raw),
                None,
                "{version}"
            );
        });
    }
}

/// A SUBSCRIBE with a RENDEZVOUS_TIMEOUT (18) for a track nobody publishes yet is held:
/// SUBSCRIBE_OK once a publisher appears within the wait, and its groups follow; TIMEOUT
/// when the wait is over first; DOES_NOT_EXIST at once without a wait.
#[test]
fn a_subscribe_with_a_rendezvous_waits_for_its_publisher() {
    seeded(78, |runtime| {
        let draft = Draft::D18;
        let mut relay = Relay::new();
        // The control streams stay open (`_control`); each SUBSCRIBE has its own.
        let (mut raw, _control) = moqt_client(runtime, &mut relay, Version::Moqt18);
        let subscribe = |request_id: u64, name: &str, wait: Option<Duration>| Subscribe {
            request_id,
            namespace: Namespace::from_strs(["chat", name]),
            name: Bytes::from_static(b"messages"),
            parameters: moqx_net::moqt::MessageParameters {
                rendezvous_timeout: wait,
                ..Default::default()
            },
        };
        let open = |raw: &mut TestTransport, message: &Subscribe| {
            let waiter = Waiter::new(Waker::noop());
            let Poll::Ready(Ok((send, recv))) = raw.poll_open_bidi(&waiter) else {
                panic!("opens at once")
            };
            let mut stream = Stream::new(send, Some(recv), draft);
            stream.send(message);
            stream
        };
        let mut held = open(&mut raw, &subscribe(0, "room", Some(5 * SECOND)));
        let mut timed_out = open(&mut raw, &subscribe(2, "empty", Some(2 * SECOND)));
        let mut at_once = open(&mut raw, &subscribe(4, "none", None));

        let reply = at_once.next(runtime, &mut raw).expect("a reply at once");
        let error = RequestError::from_frame(&reply, draft).expect("REQUEST_ERROR");
        assert_eq!(error.code, 0x10, "DOES_NOT_EXIST");

        // A publisher appears a second into the wait.
        runtime.advance(SECOND);
        relay.base.version = Version::Lite05;
        relay.link.protocol = None;
        let (_publisher, _broadcast, mut track) =
            publisher(runtime, &mut relay, "chat/room", "messages");
        let reply = held.next(runtime, &mut raw).expect("SUBSCRIBE_OK");
        SubscribeOk::from_frame(&reply, draft).expect("SUBSCRIBE_OK once published");
        moqx_net::sim::send(&mut track, 0, "hello");
        let (_, objects) = next_group(runtime, &mut raw, draft).expect("the group");
        assert_eq!(objects, [Bytes::from_static(b"hello")]);

        runtime.advance(2 * SECOND);
        let reply = timed_out
            .next(runtime, &mut raw)
            .expect("a reply after the wait");
        let error = RequestError::from_frame(&reply, draft).expect("REQUEST_ERROR");
        assert_eq!(error.code, 0x2, "TIMEOUT");
        assert_eq!(common::relay::close_code(runtime, &mut raw), None);
    });
}
