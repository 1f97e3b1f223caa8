//! WebTransport over HTTP/3 on real quiche connections (real TLS, real packets on an
//! in-memory pump): the handshake both ways, moq-lite sessions over it, and what a
//! malformed or refused request gets.

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::task::{Poll, Waker};

use bytes::Bytes;
use common::webtransport::{URL, established, finish, request};
use common::{BusyRuntime, connected_pair, run_until};
use moqx_kio::Waiter;
use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::session::{self, SessionConfig};
use moqx_net::transport::{RecvStream, SendStream, Session, StreamError, TransportError};
use moqx_runtime::binding::BindingSession;
use moqx_runtime::webtransport::{ServerHandshake, StatusCode, WebTransportError};

#[test]
fn the_request_carries_the_path_and_offered_protocols_and_the_response_selects_one() {
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, "wt-request", b"h3");
    let (client_side, request) =
        request(&runtime, &client, &server, &["moq-lite-05", "moq-lite-04"]);
    assert_eq!(request.path(), "/room/7?jwt=abc");
    assert_eq!(request.url().as_str(), URL);
    assert_eq!(request.protocols(), ["moq-lite-05", "moq-lite-04"]);
    let server_session = request.accept(Some("moq-lite-05"));
    let client_session = finish(&runtime, &client, &server, client_side).expect("accepted");
    assert_eq!(client_session.protocol(), Some("moq-lite-05"));
    assert_eq!(server_session.protocol(), Some("moq-lite-05"));
    assert_eq!(client_session.id(), server_session.id());
}

#[test]
fn a_broadcast_flows_between_moq_sessions_over_webtransport() {
    let runtime = BusyRuntime::default();
    let (client, server, client_session, server_session) = established(&runtime, "wt-flow");

    let published = Origin::new();
    let broadcast = BroadcastProducer::new();
    let mut track = broadcast.create_track(Track::new("chat"));
    published.publish("room", &broadcast).unwrap();
    let _server = session::accept(
        runtime.clone(),
        BindingSession::from(server_session),
        SessionConfig::default().with_publisher(&published),
    );
    let discovered = Origin::new();
    // No SETUP path over WebTransport: the path was in the CONNECT.
    let _client = session::connect(
        runtime.clone(),
        BindingSession::from(client_session),
        SessionConfig::default().with_subscriber(&discovered),
    );
    assert!(
        run_until(&runtime, &client, &server, || discovered
            .consume_broadcast("room")
            .is_some()),
        "ANNOUNCE crosses WebTransport"
    );
    let remote = discovered.consume_broadcast("room").unwrap();
    let received = Rc::new(RefCell::new(Vec::new()));
    let sink = received.clone();
    runtime.spawn_task(async move {
        let Ok(mut track) = remote.subscribe_track("chat").await else {
            return;
        };
        while let Ok(Some(mut group)) = track.next_group().await {
            while let Ok(Some(frame)) = group.read_frame().await {
                sink.borrow_mut().push(frame.payload);
            }
        }
    });
    assert!(run_until(&runtime, &client, &server, || track
        .consumer_count()
        > 0));
    let big = Bytes::from(vec![9u8; 1 << 20]);
    for payload in [Bytes::from_static(b"hello"), big.clone()] {
        let mut group = track.append_group();
        group.write(0, payload);
        group.finish();
    }
    assert!(
        run_until(&runtime, &client, &server, || received.borrow().len() == 2),
        "both frames arrive, the 1 MB one across many packets"
    );
    // Newest group first (moq-lite's priority): the big one may overtake "hello".
    let received = received.borrow();
    assert!(received.iter().any(|frame| frame == "hello"));
    assert!(received.contains(&big));
}

#[test]
fn streams_datagrams_and_codes_keep_their_webtransport_meaning() {
    let runtime = BusyRuntime::default();
    let (client, server, mut client_session, mut server_session) =
        established(&runtime, "wt-streams");
    let waiter = Waiter::new(Waker::noop());

    // A uni stream: the peer reads exactly what was written, header stripped.
    let Poll::Ready(Ok(mut send)) = client_session.poll_open_uni(&waiter) else {
        panic!("a uni stream opens at once");
    };
    assert!(
        send.poll_write(&waiter, &mut Bytes::from_static(b"payload"))
            .is_ready()
    );
    send.finish().unwrap();
    let mut read = Vec::new();
    let mut accepted = None;
    assert!(run_until(&runtime, &client, &server, || {
        if accepted.is_none()
            && let Poll::Ready(result) = server_session.poll_accept_uni(&waiter)
        {
            accepted = Some(result.expect("a stream"));
        }
        if let Some(stream) = &mut accepted {
            while let Poll::Ready(Ok(Some(chunk))) = stream.poll_read(&waiter) {
                read.extend_from_slice(&chunk);
            }
        }
        read.len() == 7
    }));
    assert_eq!(read, b"payload");

    // A reset code crosses the HTTP/3 code mapping and comes back as sent.
    let Poll::Ready(Ok((mut send, _recv))) = server_session.poll_open_bidi(&waiter) else {
        panic!("a bidi stream opens at once");
    };
    assert!(
        send.poll_write(&waiter, &mut Bytes::from_static(b"x"))
            .is_ready()
    );
    let mut accepted = None;
    assert!(run_until(&runtime, &client, &server, || {
        if let Poll::Ready(result) = client_session.poll_accept_bidi(&waiter) {
            accepted = Some(result.expect("a stream"));
        }
        accepted.is_some()
    }));
    send.reset(7);
    let (_, mut recv) = accepted.unwrap();
    let mut reset = None;
    assert!(run_until(&runtime, &client, &server, || {
        if let Poll::Ready(Err(error)) = recv.poll_read(&waiter) {
            reset = Some(error);
        }
        reset.is_some()
    }));
    assert_eq!(reset, Some(StreamError::Reset(7)));

    // Datagrams carry the session's prefix, invisible to the application. (The client
    // reads datagrams from now on: none is kept for a session that never asked.)
    assert!(client_session.poll_recv_datagram(&waiter).is_pending());
    server_session
        .send_datagram(Bytes::from_static(b"dgram"))
        .unwrap();
    let mut datagram = None;
    assert!(run_until(&runtime, &client, &server, || {
        if let Poll::Ready(Ok(payload)) = client_session.poll_recv_datagram(&waiter) {
            datagram = Some(payload);
        }
        datagram.is_some()
    }));
    assert_eq!(datagram.as_deref(), Some(&b"dgram"[..]));

    // The close code and reason reach the peer.
    server_session.close(0x42, "bye");
    let mut closed = None;
    assert!(run_until(&runtime, &client, &server, || {
        if let Poll::Ready(error) = client_session.poll_closed(&waiter) {
            closed = Some(error);
        }
        closed.is_some()
    }));
    assert_eq!(
        closed,
        Some(TransportError::Closed {
            code: 0x42,
            reason: "bye".into(),
            remote: true,
        })
    );
}

#[test]
fn a_rejected_request_reports_its_status_to_the_client() {
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, "wt-reject", b"h3");
    let (client_side, request) = request(&runtime, &client, &server, &["moq-lite-05"]);
    request.reject(StatusCode::FORBIDDEN);
    let outcome = finish(&runtime, &client, &server, client_side);
    assert_eq!(
        outcome.unwrap_err(),
        WebTransportError::Rejected { status: 403 }
    );
}

#[test]
fn a_server_selecting_no_offered_protocol_is_a_mismatch() {
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, "wt-mismatch", b"h3");
    let (client_side, request) = request(&runtime, &client, &server, &["moq-lite-05"]);
    let _session = request.accept(None);
    let outcome = finish(&runtime, &client, &server, client_side);
    assert_eq!(
        outcome.unwrap_err(),
        WebTransportError::ProtocolMismatch {
            offered: vec!["moq-lite-05".into()],
            selected: None,
        }
    );
}

#[test]
fn a_malformed_connect_gets_400_and_a_closed_connection_naming_the_problem() {
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, "wt-malformed", b"h3");
    let waiter = Waiter::new(Waker::noop());
    let mut server_side = ServerHandshake::new(server.session());
    // A hand-built client: SETTINGS, then a HEADERS frame whose field section is garbage.
    let mut raw = client.session();
    let Poll::Ready(Ok(mut control)) = raw.poll_open_uni(&waiter) else {
        panic!("a uni stream");
    };
    let mut settings = web_transport_proto::Settings::default();
    settings.enable_webtransport(1);
    let mut bytes = bytes::BytesMut::new();
    settings.encode(&mut bytes);
    assert!(control.poll_write(&waiter, &mut bytes.freeze()).is_ready());
    let Poll::Ready(Ok((mut request, _response))) = raw.poll_open_bidi(&waiter) else {
        panic!("a bidi stream");
    };
    let garbage = Bytes::from_static(&[0x01, 0x04, 0xff, 0xff, 0xff, 0xff]);
    assert!(request.poll_write(&waiter, &mut garbage.clone()).is_ready());

    let mut outcome = None;
    assert!(run_until(&runtime, &client, &server, || {
        if let Poll::Ready(result) = server_side.poll(&waiter) {
            outcome = Some(result);
        }
        outcome.is_some()
    }));
    let Some(Err(WebTransportError::BadRequest(reason))) = outcome else {
        panic!("a malformed request is refused, got {outcome:?}");
    };
    assert!(reason.contains("malformed CONNECT"), "{reason}");
    let mut closed = None;
    assert!(run_until(&runtime, &client, &server, || {
        if let Poll::Ready(error) = raw.poll_closed(&waiter) {
            closed = Some(error);
        }
        closed.is_some()
    }));
    let Some(TransportError::Closed { code, reason, .. }) = closed else {
        panic!("the connection closes, got {closed:?}");
    };
    assert_eq!(code, 0x10e, "H3_MESSAGE_ERROR");
    assert!(reason.contains("malformed CONNECT"), "{reason}");
}

/// Reads every uni stream `session` accepts until `streams` of them ended, pumping
/// `client` and `server`; their contents in the order they ended.
fn read_uni_streams(
    runtime: &BusyRuntime,
    client: &moqx_runtime::quic::QuicConnection,
    server: &moqx_runtime::quic::QuicConnection,
    session: &mut impl Session,
    streams: usize,
    mut write: impl FnMut() -> bool,
) -> Vec<Vec<u8>> {
    let waiter = Waiter::new(Waker::noop());
    let mut open = Vec::new();
    let mut ended = Vec::new();
    assert!(run_until(runtime, client, server, || {
        let written = write();
        while let Poll::Ready(result) = session.poll_accept_uni(&waiter) {
            open.push((result.expect("a stream"), Vec::new()));
        }
        open.retain_mut(|(stream, read)| {
            loop {
                match stream.poll_read(&waiter) {
                    Poll::Ready(Ok(Some(chunk))) => read.extend_from_slice(&chunk),
                    Poll::Ready(Ok(None)) => {
                        ended.push(std::mem::take(read));
                        return false;
                    }
                    Poll::Ready(Err(error)) => panic!("a stream failed: {error}"),
                    Poll::Pending => return true,
                }
            }
        });
        written && ended.len() == streams
    }));
    ended
}

#[test]
fn a_uni_streams_header_goes_with_its_first_write_whatever_its_size_or_end() {
    let runtime = BusyRuntime::default();
    let (client, server, mut client_session, mut server_session) =
        established(&runtime, "wt-first-write");
    let waiter = Waiter::new(Waker::noop());
    let mut open = || match client_session.poll_open_uni(&waiter) {
        Poll::Ready(Ok(stream)) => stream,
        other => panic!("a uni stream opens at once: {:?}", other.map(|r| r.err())),
    };
    // Finished with nothing written: the header and the FIN alone.
    let mut empty = open();
    empty.finish().unwrap();
    // A small last write: header, bytes and FIN in one.
    let mut small = open();
    let mut small_data = Bytes::from_static(b"one write");
    // A first write larger than what is copied behind the header, larger than the
    // stream's first window too: written over several polls.
    let mut large = open();
    let large_payload: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    let mut large_data = Bytes::from(large_payload.clone());
    let mut large_done = false;
    let mut small_done = false;
    let mut ended = read_uni_streams(&runtime, &client, &server, &mut server_session, 3, || {
        if !small_done {
            small_done = small
                .poll_write_final(&waiter, &mut small_data)
                .map(|r| r.unwrap())
                .is_ready();
        }
        if !large_done
            && large
                .poll_write(&waiter, &mut large_data)
                .map(|r| r.unwrap())
                .is_ready()
        {
            large.finish().unwrap();
            large_done = true;
        }
        small_done && large_done
    });
    ended.sort_by_key(Vec::len);
    assert_eq!(ended[0], b"");
    assert_eq!(ended[1], b"one write");
    assert!(ended[2] == large_payload, "the large stream arrives whole");
}
