//! Thread-per-core mode on loopback: 200 connections over 2 and over 4 workers, each
//! publishing to and reading from a peer on (most likely) another worker; every packet on
//! its connection's worker (no misrouted packet), including after a client switches to a
//! new connection ID, and after a client moves to a new address (where the kernel's
//! 4-tuple hash alone would pick another worker three times in four: only the steering
//! program keeps it on its own).

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use common::{PATIENCE, RawPeer};
use moq_net::model::Origin;
use moq_net::session::SessionConfig;
use moq_runtime::endpoint::EndpointCounters;
use moq_runtime::tls::Certificate;
use moq_runtime::udp::UdpConfig;
use moq_tokio::{Server, ServerConfig};

/// A relay-like server (both halves of every session on one origin) with `workers`
/// workers, accepting everyone until aborted; its address and its workers' counters.
async fn server(
    workers: usize,
) -> (
    SocketAddr,
    Vec<Arc<EndpointCounters>>,
    tokio::task::JoinHandle<()>,
) {
    let origin = Origin::new();
    let config = ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        Certificate::self_signed(&["localhost".into()]).unwrap(),
        SessionConfig {
            publish: Some(origin.clone()),
            subscribe: Some(origin),
            ..SessionConfig::default()
        },
    );
    let mut server = Server::bind_per_core(config, workers).await.unwrap();
    assert_eq!(server.workers(), workers);
    let (address, counters) = (server.local_addr(), server.counters().to_vec());
    let accepting = tokio::spawn(async move {
        let mut sessions = Vec::new();
        while let Some(request) = server.accept().await {
            sessions.push(request.accept());
        }
    });
    (address, counters, accepting)
}

/// Packets that reached a worker other than their connection's, over all workers.
fn misrouted(counters: &[Arc<EndpointCounters>]) -> u64 {
    counters
        .iter()
        .map(|counters| counters.misrouted.load(Ordering::Relaxed))
        .sum()
}

/// Every worker received datagrams, and none was for another worker.
fn assert_steered(counters: &[Arc<EndpointCounters>]) {
    let workers = counters.len();
    for (worker, counters) in counters.iter().enumerate() {
        let datagrams = counters.datagrams.load(Ordering::Relaxed);
        let misrouted = counters.misrouted.load(Ordering::Relaxed);
        assert_eq!(misrouted, 0, "worker {worker} of {workers}");
        assert!(
            datagrams > 0,
            "worker {worker} of {workers} got no datagram"
        );
    }
}

async fn two_hundred_connections(workers: usize) {
    let (address, counters, accepting) = server(workers).await;
    let url = format!("moqt://localhost:{}/", address.port());
    let index = |i: usize| Bytes::from((i as u32).to_be_bytes().to_vec());
    let received = common::ring(&url, 200, index, UdpConfig::default()).await;
    for (i, payload) in received.iter().enumerate() {
        assert_eq!(*payload, index((i + 1) % 200), "peer {i}");
    }
    // 200 clients spread by the kernel's hash: every worker gets some (all of them on
    // one of 2 workers has odds of 2^-199).
    assert_steered(&counters);
    accepting.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_connections_over_two_workers() {
    two_hundred_connections(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_connections_over_four_workers() {
    two_hundred_connections(4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_switching_connection_ids_stays_on_its_worker() {
    let (address, counters, accepting) = server(4).await;
    let setup = tokio::task::spawn_blocking(move || {
        let mut client = RawPeer::start(address, b"moq-lite-05");
        // The server gives a spare connection ID once established (NEW_CONNECTION_ID).
        assert!(client.drive(|conn| conn.is_established() && conn.available_dcids() > 0));
        // Retire the one in use: from here every packet carries the new one.
        client.conn.retire_dcid(0).unwrap();
        // SETUP with path "/", and the server's SETUP back: data flows on the new ID.
        let written = client
            .conn
            .stream_send(2, &[0x01, 0x04, 0x01, 0x02, 0x01, 0x2f], true)
            .unwrap();
        assert_eq!(written, 6);
        let mut reply = Vec::new();
        let replied = client.drive(|conn| {
            let mut buf = [0u8; 64];
            for id in conn.readable().collect::<Vec<_>>() {
                while let Ok((n, _)) = conn.stream_recv(id, &mut buf) {
                    reply.extend_from_slice(&buf[..n]);
                }
            }
            reply.len() >= 3
        });
        assert!(replied, "the server's SETUP after the switch");
        assert_eq!(reply, [0x01, 0x01, 0x00]);
    });
    tokio::time::timeout(PATIENCE, setup)
        .await
        .expect("the exchange completes")
        .unwrap();
    assert_eq!(misrouted(&counters), 0);
    accepting.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_move_to_new_addresses_stay_on_their_workers() {
    let (address, counters, accepting) = server(4).await;
    // Three clients, four moves each: were the kernel's 4-tuple hash deciding, each move
    // would land on the right one of 4 workers one time in four (all 12: 1 in 16 million).
    let moves = tokio::task::spawn_blocking(move || {
        for client_index in 0..3u8 {
            let mut client = RawPeer::start(address, b"moq-lite-05");
            assert!(client.drive(|conn| conn.is_established()));
            for step in 0..4u8 {
                // A spare connection ID of the server's to move with, and one of ours
                // for the server to answer to.
                assert!(
                    client.drive(|conn| conn.available_dcids() > 0),
                    "client {client_index}, move {step}: a spare connection ID"
                );
                client
                    .conn
                    .new_scid(
                        &quiche::ConnectionId::from_ref(&[0x60 + step; 16]),
                        u128::from(step) + 1,
                        true,
                    )
                    .unwrap();
                // A new source port: a NAT rebinding, or a phone changing networks.
                let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
                socket
                    .set_read_timeout(Some(Duration::from_millis(5)))
                    .unwrap();
                let moved_to = socket.local_addr().unwrap();
                client.socket = socket;
                // PATH_CHALLENGE from the new address: the PATH_RESPONSE comes back only
                // if the packets from it reach the worker that holds the connection.
                client.conn.probe_path(moved_to, address).unwrap();
                assert!(
                    client.drive(|conn| conn.is_path_validated(moved_to, address) == Ok(true)),
                    "client {client_index}, move {step}: the new path validated"
                );
                client.conn.migrate_source(moved_to).unwrap();
            }
        }
    });
    tokio::time::timeout(PATIENCE, moves)
        .await
        .expect("the moves complete")
        .unwrap();
    assert_eq!(misrouted(&counters), 0);
    accepting.abort();
}
