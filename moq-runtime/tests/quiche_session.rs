//! moq-lite sessions over real QUIC: two quiche connections (real TLS 1.3 with a
//! self-signed certificate, real packets) joined by an in-memory packet pump, each end
//! running a `moqx_net` session machine through the quiche adapter.
//!
//! The executor here is a busy loop that polls every task and pumps every packet each
//! turn: enough to show the adapter carries a session end to end. The real endpoint with
//! sockets and wakers is the tokio driver's.

mod common;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{Poll, Waker};

use common::{BusyRuntime, certificate_files, config, connected_pair, run_until};
use moqx_kio::Waiter;
use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::session::{self, SessionConfig};
use moqx_runtime::quic::QuicConnection;

#[test]
fn a_broadcast_flows_over_real_quic_between_two_sessions() {
    let (_certificate_dir, chain, key) = certificate_files("flow");

    let client_addr: SocketAddr = "127.0.0.1:4000".parse().unwrap();
    let server_addr: SocketAddr = "127.0.0.1:4433".parse().unwrap();
    let client_cid = quiche::ConnectionId::from_ref(&[1; 16]);
    let server_cid = quiche::ConnectionId::from_ref(&[2; 16]);
    let mut client_config = config(None);
    let mut server_config = config(Some((&chain, &key)));
    let client = QuicConnection::new(
        quiche::connect(
            Some("localhost"),
            &client_cid,
            client_addr,
            server_addr,
            &mut client_config,
        )
        .expect("connect"),
    );
    let server = QuicConnection::new(
        quiche::accept(
            &server_cid,
            None,
            server_addr,
            client_addr,
            &mut server_config,
        )
        .expect("accept"),
    );
    let runtime = BusyRuntime::default();
    assert!(
        run_until(&runtime, &client, &server, || client.is_established()
            && server.is_established()),
        "the TLS handshake completes"
    );
    assert_eq!(
        moqx_net::transport::Session::protocol(&client.session()),
        Some("moq-lite-05"),
        "ALPN"
    );

    // The server publishes; the client subscribes.
    let published = Origin::new();
    let broadcast = BroadcastProducer::new();
    let mut track = broadcast.create_track(Track::new("clock"));
    published.publish("time", &broadcast).unwrap();
    let _server_session = session::accept(
        runtime.clone(),
        server.session().into(),
        SessionConfig::default().with_publisher(&published),
    );
    let discovered = Origin::new();
    let client_session = session::connect(runtime.clone(), client.session().into(), {
        let mut session_config = SessionConfig::default();
        session_config.subscribe = Some(discovered.clone());
        session_config.path = Some("/".into());
        session_config
    });
    assert!(
        run_until(&runtime, &client, &server, || discovered
            .consume_broadcast("time")
            .is_some()),
        "the client discovers the broadcast over QUIC"
    );

    let received = Rc::new(RefCell::new(Vec::new()));
    let remote = discovered.consume_broadcast("time").unwrap();
    let sink = received.clone();
    runtime.spawn_task(async move {
        let Ok(mut track) = remote.subscribe_track("clock").await else {
            return;
        };
        while let Ok(Some(mut group)) = track.next_group().await {
            while let Ok(Some(frame)) = group.read_frame().await {
                sink.borrow_mut().push(frame.payload);
            }
        }
    });
    assert!(
        run_until(&runtime, &client, &server, || track.consumer_count() > 0),
        "TRACK and SUBSCRIBE reach the publisher"
    );
    for (timestamp, text) in [(0, "12:00:00"), (1000, "12:00:01")] {
        let mut group = track.append_group();
        group.write(timestamp, text);
        group.finish();
    }
    // A 1 MB frame crosses flow control windows and many packets.
    let big = bytes::Bytes::from(vec![7u8; 1 << 20]);
    let mut group = track.append_group();
    group.write(2000, big.clone());
    group.finish();
    assert!(
        run_until(&runtime, &client, &server, || received.borrow().len() == 3),
        "every frame arrives"
    );
    // Groups in flight together go newest first (moq-lite's priority), so the big one may
    // overtake the two before it: every frame arrives, in whatever order.
    let received = received.borrow();
    assert!(received.iter().any(|frame| frame == "12:00:00"));
    assert!(received.iter().any(|frame| frame == "12:00:01"));
    assert!(received.contains(&big));

    // The handle reads the connection's counters while the session runs, and keeps the
    // last reading once it ended.
    let live = client_session.stats();
    assert!(live.bytes_received > 1 << 20, "{live:?}");
    assert!(live.rtt.is_some(), "{live:?}");
    client_session.close(moqx_net::Error::Cancel);
    assert!(
        run_until(&runtime, &client, &server, || client_session.is_closed()),
        "the session closes"
    );
    let last = client_session.stats();
    assert!(last.bytes_received >= live.bytes_received, "{last:?}");
    assert!(last.bytes_sent >= live.bytes_sent, "{last:?}");
}

#[test]
fn datagrams_and_the_close_code_cross_the_adapter() {
    use moqx_net::transport::{Session, TransportError};
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, "close", b"moq-lite-05");
    let (mut client_session, mut server_session) = (client.session(), server.session());
    let waiter = Waiter::new(Waker::noop());

    assert!(client_session.max_datagram_size().is_some());
    // A datagram that arrives before anyone reads datagrams is dropped, not queued.
    client_session
        .send_datagram(bytes::Bytes::from_static(b"unwanted"))
        .unwrap();
    assert!(run_until(&runtime, &client, &server, || server
        .bookkeeping()
        .datagrams_dropped
        == 1));
    assert_eq!(server.bookkeeping().queued_datagrams, 0);
    // Once the session reads datagrams (it waits for one here), they are kept for it.
    assert!(server_session.poll_recv_datagram(&waiter).is_pending());
    client_session
        .send_datagram(bytes::Bytes::from_static(b"ping"))
        .unwrap();
    let mut datagram = None;
    assert!(run_until(&runtime, &client, &server, || {
        if let Poll::Ready(Ok(payload)) = server_session.poll_recv_datagram(&waiter) {
            datagram = Some(payload);
        }
        datagram.is_some()
    }));
    assert_eq!(datagram.as_deref(), Some(&b"ping"[..]));

    client_session.close(0x42, "bye");
    let mut closed = None;
    assert!(run_until(&runtime, &client, &server, || {
        if let Poll::Ready(error) = server_session.poll_closed(&waiter) {
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

/// Packets `from` would send now, held back instead of delivered.
fn held_packets(from: &QuicConnection) -> Vec<(Vec<u8>, quiche::SendInfo)> {
    let mut buf = [0u8; 65_536];
    let mut packets = Vec::new();
    while let Ok(Some((len, info))) = from.send(&mut buf) {
        packets.push((buf[..len].to_vec(), info));
    }
    packets
}

/// quiche counts a stream's sending side complete once its bytes are acknowledged, FIN or
/// not (cloudflare/quiche#2525). A FIN written on its own after the bytes went out, with
/// the ACK for those bytes processed before the FIN is in a packet, used to be dropped with
/// the collected stream: the peer read every byte and never the end. The adapter puts a
/// lone FIN in a packet before it lets ACKs in.
#[test]
fn a_lone_fin_survives_an_ack_that_overtakes_it() {
    use moqx_net::transport::{RecvStream, SendStream, Session};
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, "lone-fin", b"moq-lite-05");
    let (mut client_session, mut server_session) = (client.session(), server.session());
    let waiter = Waiter::new(Waker::noop());

    // The server sends a stream's bytes; the client receives them and acknowledges.
    let Poll::Ready(Ok(mut send)) = server_session.poll_open_uni(&waiter) else {
        panic!("the server has stream credit");
    };
    let mut data = bytes::Bytes::from_static(b"hello");
    assert!(send.poll_write(&waiter, &mut data).is_ready());
    common::pump(&server, &client);
    let Poll::Ready(Ok(mut recv)) = client_session.poll_accept_uni(&waiter) else {
        panic!("the stream arrived");
    };
    let acks = held_packets(&client);
    assert!(
        !acks.is_empty(),
        "the client acknowledges the stream's bytes"
    );

    // The stream ends with a FIN of its own, and the ACK for its bytes arrives before the
    // server sent anything more.
    send.finish().expect("the FIN is queued");
    for (mut packet, info) in acks {
        server
            .recv(&mut packet, info.from, info.to)
            .expect("the ACK");
    }

    let mut read = Vec::new();
    let mut ended = false;
    assert!(
        run_until(&runtime, &client, &server, || {
            while let Poll::Ready(result) = recv.poll_read(&waiter) {
                match result.expect("the stream ends before the connection times out") {
                    Some(chunk) => read.extend_from_slice(&chunk),
                    None => {
                        ended = true;
                        break;
                    }
                }
            }
            ended
        }),
        "the client sees the end of the stream (read so far: {read:?})"
    );
    assert_eq!(read, b"hello");
}
