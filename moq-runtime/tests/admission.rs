//! An endpoint's admission policy with real quiche handshakes, datagrams passed in memory:
//! QUIC Retry, the cap on handshakes in progress, and the cap per client address.

mod common;

use std::net::SocketAddr;
use std::time::Instant;

use common::{certificate_files, config};
use moqx_runtime::admission::Refused;
use moqx_runtime::admission::{Admission, Gate};
use moqx_runtime::endpoint::{Endpoint, EndpointError};
use moqx_runtime::reset::StatelessResetKey;

const SERVER: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 5443);

fn client_at(address: &str) -> (Endpoint, SocketAddr) {
    let address: SocketAddr = address.parse().unwrap();
    (
        Endpoint::new(config(None), address, 0, 10, Instant::now()),
        address,
    )
}

fn server(name: &str, admission: Admission) -> Endpoint {
    let (_certificate_dir, chain, key) = certificate_files(name);
    let mut server = Endpoint::new(config(Some((&chain, &key))), SERVER, 1, 100, Instant::now());
    server.set_gate(Gate::new(admission, Instant::now()));
    // As every server's endpoint has (`ServerConfig::endpoint`). (With a raw quiche
    // client's 20-byte first ID, a token after a Retry overflowed quiche's transport
    // parameters; the hostile suite's handshake flood pins that.)
    server.set_stateless_reset_key(StatelessResetKey::from_secret(name.as_bytes()));
    server
}

/// One flight each way: the client's datagrams to the server (returning what the server
/// said about each), then the server's back to every client by address.
fn flight(
    clients: &mut [(Endpoint, SocketAddr)],
    server: &mut Endpoint,
) -> Vec<(SocketAddr, Result<(), EndpointError>)> {
    let now = Instant::now();
    let mut results = Vec::new();
    for (client, address) in clients.iter_mut() {
        let mut transmits = Vec::new();
        client.handle_timeouts(now);
        client.poll_transmits(now, &mut transmits);
        for transmit in &transmits {
            for datagram in transmit.contents.chunks(transmit.segment_size) {
                let result = server.handle_datagram(&mut datagram.to_vec(), *address, None, now);
                results.push((*address, result));
            }
        }
    }
    let mut transmits = Vec::new();
    server.handle_timeouts(now);
    server.poll_transmits(now, &mut transmits);
    for transmit in &transmits {
        if let Some((client, _)) = clients.iter_mut().find(|(_, a)| *a == transmit.destination) {
            for datagram in transmit.contents.chunks(transmit.segment_size) {
                let _ = client.handle_datagram(&mut datagram.to_vec(), SERVER, None, now);
            }
        }
    }
    results
}

fn established(server: &mut Endpoint, count: usize) -> usize {
    let mut accepted = 0;
    while server.accept().is_some() {
        accepted += 1;
    }
    accepted.min(count)
}

/// A server asking every client to prove its address: the first Initial gets a Retry and
/// no connection state; the client's second Initial, echoing the token, gets a connection
/// that completes.
#[test]
fn a_retry_validates_the_clients_address_and_the_handshake_completes() {
    let mut server = server("retry", {
        let mut admission = Admission::default();
        admission.retry_above = 0;
        admission
    });
    let mut clients = vec![client_at("127.0.0.1:6000")];
    let connection = clients[0]
        .0
        .connect("localhost", SERVER, Instant::now())
        .unwrap();
    flight(&mut clients, &mut server);
    assert_eq!(server.len(), 0, "a Retry keeps no state");
    let mut accepted = 0;
    for _ in 0..10 {
        flight(&mut clients, &mut server);
        accepted += established(&mut server, 1);
    }
    assert_eq!(accepted, 1);
    assert!(connection.is_established());
    assert_eq!((server.len(), server.half_open()), (1, 0));
}

/// Handshakes in progress have a cap of their own: past it an Initial is refused, and the
/// connections already established are not what it counts.
#[test]
fn handshakes_past_the_half_open_cap_are_refused() {
    let mut server = server("half-open", {
        let mut admission = Admission::default();
        admission.max_half_open = 2;
        admission.retry_above = usize::MAX;
        admission
    });
    let mut clients: Vec<_> = (0..3)
        .map(|i| client_at(&format!("127.0.0.{}:6000", i + 1)))
        .collect();
    for (client, _) in &mut clients {
        client.connect("localhost", SERVER, Instant::now()).unwrap();
    }
    // Only the clients' first flight: three Initials, no answer delivered yet.
    let now = Instant::now();
    let mut refused = std::collections::HashSet::new();
    for (client, address) in &mut clients {
        let mut transmits = Vec::new();
        client.poll_transmits(now, &mut transmits);
        for transmit in &transmits {
            for datagram in transmit.contents.chunks(transmit.segment_size) {
                let result = server.handle_datagram(&mut datagram.to_vec(), *address, None, now);
                if let Err(EndpointError::Refused(Refused::HalfOpenFull(2))) = result {
                    refused.insert(*address);
                }
            }
        }
    }
    assert_eq!((refused.len(), server.half_open(), server.len()), (1, 2, 2));

    // The two complete; then there is room for a new handshake again.
    let mut pair: Vec<_> = clients.drain(..2).collect();
    for _ in 0..10 {
        flight(&mut pair, &mut server);
    }
    assert_eq!(established(&mut server, 2), 2);
    assert_eq!(server.half_open(), 0);
    let mut late = vec![client_at("127.0.0.9:6000")];
    late[0]
        .0
        .connect("localhost", SERVER, Instant::now())
        .unwrap();
    assert!(
        flight(&mut late, &mut server)
            .iter()
            .all(|(_, result)| result.is_ok())
    );
    assert_eq!(server.half_open(), 1);
}

/// One address holds at most its cap of established connections; another address is not
/// affected. Counted once established: handshakes that never complete (spoofed Initials
/// would not) use up nothing.
#[test]
fn an_address_past_its_cap_is_refused_and_others_are_not() {
    let mut server = server("per-address", {
        let mut admission = Admission::default();
        admission.max_per_address = 1;
        admission.retry_above = usize::MAX;
        admission
    });
    // Two handshakes from 127.0.0.1 start: neither counts until one completes.
    let mut clients = vec![client_at("127.0.0.1:6000"), client_at("127.0.0.1:6001")];
    for (client, _) in &mut clients {
        client.connect("localhost", SERVER, Instant::now()).unwrap();
    }
    let first = flight(&mut clients, &mut server);
    assert!(
        first.iter().all(|(_, result)| result.is_ok()),
        "not counted yet"
    );
    for _ in 0..10 {
        flight(&mut clients, &mut server);
    }
    assert_eq!(established(&mut server, 2), 2);
    // Now 127.0.0.1 holds two, past its cap of one: a third is refused; 127.0.0.2 is not.
    let mut late = vec![client_at("127.0.0.1:6002"), client_at("127.0.0.2:6000")];
    for (client, _) in &mut late {
        client.connect("localhost", SERVER, Instant::now()).unwrap();
    }
    let refused: std::collections::HashSet<SocketAddr> = flight(&mut late, &mut server)
        .into_iter()
        .filter(|(_, result)| {
            matches!(
                result,
                Err(EndpointError::Refused(Refused::AddressFull {
                    limit: 1,
                    ..
                }))
            )
        })
        .map(|(address, _)| address)
        .collect();
    assert_eq!(refused, ["127.0.0.1:6002".parse().unwrap()].into());
}

/// Two workers of one server share a gate: the connection cap is server-wide (a worker
/// with no connection of its own refuses once the other holds them all), and a Retry
/// token one worker minted is good on the other.
#[test]
fn workers_sharing_a_gate_share_its_caps_and_its_retry_key() {
    let gate = Gate::new(
        {
            let mut admission = Admission::default();
            admission.max_connections = 1;
            admission.retry_above = 0;
            admission
        },
        Instant::now(),
    );
    let (_certificate_dir, chain, key) = certificate_files("shared-gate");
    let mut workers: Vec<Endpoint> = (0..2u8)
        .map(|worker| {
            let mut endpoint = Endpoint::new(
                config(Some((&chain, &key))),
                SERVER,
                worker,
                100,
                Instant::now(),
            );
            endpoint.set_gate(gate.clone());
            endpoint
        })
        .collect();

    // A client's first Initial reaches worker 0 (a Retry), its second worker 1.
    let mut clients = vec![client_at("127.0.0.1:6000")];
    let connection = clients[0]
        .0
        .connect("localhost", SERVER, Instant::now())
        .unwrap();
    flight(&mut clients, &mut workers[0]);
    assert_eq!(workers[0].len(), 0, "a Retry keeps no state");
    for _ in 0..10 {
        flight(&mut clients, &mut workers[1]);
    }
    assert!(
        connection.is_established(),
        "worker 1 took worker 0's token"
    );
    assert_eq!(established(&mut workers[1], 1), 1);
    assert_eq!(gate.established(), 1);

    // The server holds its one connection, on worker 1: worker 0 refuses the next.
    let mut late = vec![client_at("127.0.0.2:6000")];
    late[0]
        .0
        .connect("localhost", SERVER, Instant::now())
        .unwrap();
    let results = flight(&mut late, &mut workers[0]);
    assert!(
        results
            .iter()
            .any(|(_, result)| matches!(result, Err(EndpointError::Refused(Refused::Full(1))))),
        "{results:?}"
    );
    assert_eq!(workers[0].len(), 0);
}
