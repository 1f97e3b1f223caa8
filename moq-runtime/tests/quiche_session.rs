//! moq-lite sessions over real QUIC: two quiche connections (real TLS 1.3 with a
//! self-signed certificate, real packets) joined by an in-memory packet pump, each end
//! running a `moq_net` session machine through the quiche adapter.
//!
//! The executor here is a busy loop that polls every task and pumps every packet each
//! turn: enough to show the adapter carries a session end to end. The real endpoint with
//! sockets and wakers is the tokio driver's.

mod common;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use common::{BusyRuntime, certificate_files, config};
use kio::Waiter;
use moq_net::model::{BroadcastProducer, Origin, Track};
use moq_net::session::{self, SessionConfig};
use moq_runtime::quic::QuicConnection;

/// Moves every pending packet from `from` to `to`.
fn pump(from: &QuicConnection, to: &QuicConnection) {
    let mut buf = [0u8; 65_536];
    while let Ok(Some((len, info))) = from.send(&mut buf) {
        let _ = to.recv(&mut buf[..len], info.from, info.to);
    }
    if from.timeout() == Some(Duration::ZERO) {
        from.on_timeout();
    }
}

/// Runs `runtime` and the pump until `done`, for at most 10 s of real time.
fn run_until(
    runtime: &BusyRuntime,
    client: &QuicConnection,
    server: &QuicConnection,
    mut done: impl FnMut() -> bool,
) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        pump(client, server);
        pump(server, client);
        runtime.turn();
        if done() {
            return true;
        }
    }
    false
}

#[test]
fn a_broadcast_flows_over_real_quic_between_two_sessions() {
    let (chain, key) = certificate_files("flow");

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
        moq_net::transport::Session::protocol(&client.session()),
        Some("moq-lite-05"),
        "ALPN"
    );

    // The server publishes; the client subscribes.
    let published = Origin::new();
    let broadcast = BroadcastProducer::new();
    let mut track = broadcast.create_track(Track::new("clock"));
    published.publish("time", &broadcast);
    let _server_session = session::accept(
        runtime.clone(),
        server.session(),
        SessionConfig {
            publish: Some(published),
            ..SessionConfig::default()
        },
    );
    let discovered = Origin::new();
    let _client_session = session::connect(
        runtime.clone(),
        client.session(),
        SessionConfig {
            subscribe: Some(discovered.clone()),
            path: Some("/".into()),
            ..SessionConfig::default()
        },
    );
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
    let received = received.borrow();
    assert_eq!(received[0], "12:00:00");
    assert_eq!(received[1], "12:00:01");
    assert_eq!(received[2], big);
}

/// A connected client/server pair of quiche connections on an in-memory pump.
fn connected_pair(runtime: &BusyRuntime, name: &str) -> (QuicConnection, QuicConnection) {
    let (chain, key) = certificate_files(name);
    let client_addr: SocketAddr = "127.0.0.1:4000".parse().unwrap();
    let server_addr: SocketAddr = "127.0.0.1:4433".parse().unwrap();
    let client = QuicConnection::new(
        quiche::connect(
            Some("localhost"),
            &quiche::ConnectionId::from_ref(&[3; 16]),
            client_addr,
            server_addr,
            &mut config(None),
        )
        .expect("connect"),
    );
    let server = QuicConnection::new(
        quiche::accept(
            &quiche::ConnectionId::from_ref(&[4; 16]),
            None,
            server_addr,
            client_addr,
            &mut config(Some((&chain, &key))),
        )
        .expect("accept"),
    );
    assert!(run_until(runtime, &client, &server, || client
        .is_established()
        && server.is_established()));
    (client, server)
}

#[test]
fn datagrams_and_the_close_code_cross_the_adapter() {
    use moq_net::transport::{Session, TransportError};
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, "close");
    let (mut client_session, mut server_session) = (client.session(), server.session());
    let waiter = Waiter::new(Waker::noop());

    assert!(client_session.max_datagram_size().is_some());
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
