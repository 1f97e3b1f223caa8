//! Thread-per-core mode on loopback: 200 connections over 2 and over 4 workers, each
//! publishing to and reading from a peer on (most likely) another worker; every packet on
//! its connection's worker (no misrouted packet), including after a client switches to a
//! new connection ID, and after a client moves to a new address (where the kernel's
//! 4-tuple hash alone would pick another worker three times in four: only the steering
//! program keeps it on its own).

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use common::{PATIENCE, assert_steered, misrouted};
use moqx_net::model::Origin;
use moqx_net::session::SessionConfig;
use moqx_runtime::endpoint::EndpointCounters;
use moqx_runtime::tls::Certificate;
use moqx_runtime::udp::UdpConfig;
use moqx_tokio::{Server, ServerConfig};

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
        SessionConfig::default()
            .with_publisher(&origin)
            .with_subscriber(&origin),
    );
    // Each worker accepts its own clients, on its own thread.
    let server = Server::bind_per_core(config, workers, |worker| async move {
        let mut sessions = Vec::new();
        while let Some(request) = worker.accept().await {
            sessions.push(request.accept());
        }
    })
    .await
    .unwrap();
    assert_eq!(server.workers(), workers);
    let (address, counters) = (server.local_addr(), server.counters().to_vec());
    let accepting = tokio::spawn(async move {
        // The server serves while it lives.
        let _server = server;
        std::future::pending::<()>().await;
    });
    (address, counters, accepting)
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
    let setup =
        tokio::task::spawn_blocking(move || common::switch_connection_id_and_set_up(address));
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
    let moves = tokio::task::spawn_blocking(move || common::move_clients(address, 3, 4));
    tokio::time::timeout(PATIENCE, moves)
        .await
        .expect("the moves complete")
        .unwrap();
    assert_eq!(misrouted(&counters), 0);
    accepting.abort();
}
