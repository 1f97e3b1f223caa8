//! The io_uring driver's workers on loopback: 200 connections over 2 and over 4 workers,
//! each publishing to and reading from a peer on (most likely) another worker; every
//! packet on its connection's worker, including after a client switches to a new
//! connection ID and after a client moves to a new address (the steering tests of the
//! tokio driver's thread-per-core mode, on this driver). The clients are tokio's, a
//! hand-built quiche peer, and 100 sessions of this driver's own client.

#[path = "../../moq-tokio/tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{PATIENCE, assert_steered, misrouted};
use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::session::SessionConfig;
use moqx_runtime::tls::Certificate;
use moqx_runtime::udp::UdpConfig;
use moqx_uring::{Client, ClientConfig, Server, ServerConfig, UringConfig};

/// A relay-like server (both halves of every session on one origin) with `workers`
/// workers, accepting everyone.
fn server(workers: usize) -> Server {
    let origin = Origin::new();
    let config = ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        Certificate::self_signed(&["localhost".into()]).unwrap(),
        SessionConfig::default()
            .with_publisher(&origin)
            .with_subscriber(&origin),
    );
    let server = Server::bind(
        config,
        workers,
        UringConfig::default(),
        |worker| async move {
            let mut sessions = Vec::new();
            while let Some(request) = worker.accept().await {
                sessions.push(request.accept());
            }
        },
    )
    .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(server.workers(), workers);
    server
}

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn two_hundred_tokio_clients(workers: usize) {
    let server = server(workers);
    let url = format!("moqt://localhost:{}/", server.local_addr().port());
    let index = |i: usize| Bytes::from((i as u32).to_be_bytes().to_vec());
    let received = tokio().block_on(common::ring(&url, 200, index, UdpConfig::default()));
    for (i, payload) in received.iter().enumerate() {
        assert_eq!(*payload, index((i + 1) % 200), "peer {i}");
    }
    // 200 clients spread by the kernel's hash: every worker gets some.
    assert_steered(server.counters());
    server.stop();
}

#[test]
fn two_hundred_connections_over_two_workers() {
    two_hundred_tokio_clients(2);
}

#[test]
fn two_hundred_connections_over_four_workers() {
    two_hundred_tokio_clients(4);
}

#[test]
fn a_hundred_sessions_of_the_uring_client() {
    const PEERS: usize = 100;
    let server = server(2);
    let clients =
        Client::start(2, UringConfig::default()).unwrap_or_else(|error| panic!("{error}"));
    let url = format!("https://localhost:{}/", server.local_addr().port());
    // Client `i` publishes `peer-i` and reads `peer-(i+1)`'s, as in `common::ring`.
    let mut tracks = Vec::new();
    let mut sessions = Vec::new();
    let mut seen = Vec::new();
    for i in 0..PEERS {
        let published = Origin::new();
        let broadcast = BroadcastProducer::new();
        tracks.push((broadcast.create_track(Track::new("data")), broadcast));
        published
            .publish(format!("peer-{i}"), &tracks[i].1)
            .unwrap();
        let origin = Origin::new();
        let config = ClientConfig::default()
            .with_session(
                SessionConfig::default()
                    .with_publisher(&published)
                    .with_subscriber(&origin),
            )
            .with_insecure_skip_verify();
        sessions.push(clients.connect(i, &url, config));
        seen.push(origin);
    }
    let sessions: Vec<_> = sessions
        .into_iter()
        .map(|session| session.wait().expect("the worker runs").expect("connects"))
        .collect();
    let readers: Vec<_> = (0..PEERS)
        .map(|i| {
            let (seen, path) = (seen[i].clone(), format!("peer-{}", (i + 1) % PEERS));
            clients.run_on(i, move |worker| async move {
                let broadcast = loop {
                    if let Some(broadcast) = seen.consume_broadcast(path.as_str()) {
                        break broadcast;
                    }
                    worker.sleep(Duration::from_millis(5)).await;
                };
                let mut track = broadcast.subscribe_track("data").await.ok()?;
                let mut group = track.next_group().await.ok()??;
                Some(group.read_frame().await.ok()??.payload)
            })
        })
        .collect();
    let start = Instant::now();
    while tracks.iter().any(|(track, _)| track.consumer_count() == 0) {
        assert!(
            start.elapsed() < PATIENCE,
            "every subscription reaches its publisher"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let index = |i: usize| Bytes::from((i as u32).to_be_bytes().to_vec());
    for (i, (track, _)) in tracks.iter_mut().enumerate() {
        let mut group = track.append_group();
        group.write(0, index(i));
        group.finish();
    }
    for (i, reader) in readers.into_iter().enumerate() {
        let payload = reader.wait().flatten().expect("the frame arrives");
        assert_eq!(payload, index((i + 1) % PEERS), "peer {i}");
    }
    assert_steered(server.counters());
    drop(sessions);
    server.stop();
}

#[test]
fn a_client_switching_connection_ids_stays_on_its_worker() {
    let server = server(4);
    let address = server.local_addr();
    common::switch_connection_id_and_set_up(address);
    assert_eq!(misrouted(server.counters()), 0);
    server.stop();
}

#[test]
fn clients_that_move_to_new_addresses_stay_on_their_workers() {
    let server = server(4);
    let address: SocketAddr = server.local_addr();
    // Three clients, four moves each: were the kernel's 4-tuple hash deciding, each move
    // would land on the right one of 4 workers one time in four.
    common::move_clients(address, 3, 4);
    assert_eq!(misrouted(server.counters()), 0);
    server.stop();
}
