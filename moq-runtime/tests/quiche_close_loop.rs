//! A client closing with an application error between its handshake's completion and its
//! confirmation, with a Handshake-space probe due: quiche 0.30 answers every `send` with
//! another Handshake probe and never sends the close, so an endpoint draining the
//! connection until `send` has nothing loops forever, growing its batch by a packet per
//! turn (the conformance suite hit it on a loaded machine: a client worker stuck, its
//! memory climbing). The adapter abandons such a connection after a bounded number of
//! packets.

use std::net::SocketAddr;
use std::time::Instant;

use moqx_net::coding::Version;
use moqx_runtime::binding::Binding;
use moqx_runtime::quic::QuicConnection;
use moqx_runtime::quiche_config::{QuicLimits, client_config, server_config};
use moqx_runtime::tls::Certificate;

const CLIENT: &str = "127.0.0.1:1000";
const SERVER: &str = "127.0.0.1:2000";

/// A client whose handshake completed, and the server it did it with. If `lose_finished`,
/// the client's last flight (its Finished) went out but was lost, and its probe timer
/// then fired; if not, the handshake is confirmed (the server has the Finished, the
/// client the HANDSHAKE_DONE).
fn completed_client(lose_finished: bool) -> (QuicConnection, quiche::Connection) {
    let (client_addr, server_addr): (SocketAddr, SocketAddr) =
        (CLIENT.parse().unwrap(), SERVER.parse().unwrap());
    let certificate = Certificate::self_signed(&["localhost".into()]).unwrap();
    let limits = QuicLimits::default();
    let mut server_config = server_config(&certificate, &limits, &[Version::Lite05]).unwrap();
    let mut config = client_config(Binding::Quic, &[Version::Lite05], false, &limits).unwrap();
    let client = QuicConnection::new(
        quiche::connect(
            Some("localhost"),
            &quiche::ConnectionId::from_ref(&[1; 16]),
            client_addr,
            server_addr,
            &mut config,
        )
        .unwrap(),
    );
    let mut server = quiche::accept(
        &quiche::ConnectionId::from_ref(&[2; 16]),
        None,
        server_addr,
        client_addr,
        &mut server_config,
    )
    .unwrap();
    let mut buf = vec![0u8; 65_536];
    for _ in 0..10 {
        while let Ok(Some((len, _))) = client.send(&mut buf) {
            let _ = server.recv(
                &mut buf[..len],
                quiche::RecvInfo {
                    from: client_addr,
                    to: server_addr,
                },
            );
        }
        while let Ok((len, _)) = server.send(&mut buf) {
            let _ = client.recv(&mut buf[..len], server_addr, client_addr);
        }
        if client.is_established() {
            break;
        }
    }
    assert!(client.is_established(), "the handshake completed");
    if lose_finished {
        while let Ok(Some(_)) = client.send(&mut buf) {}
        let due = client.timeout().expect("a probe timer is set");
        std::thread::sleep(due);
        client.on_timeout(Instant::now());
    } else {
        while let Ok(Some((len, _))) = client.send(&mut buf) {
            let _ = server.recv(
                &mut buf[..len],
                quiche::RecvInfo {
                    from: client_addr,
                    to: server_addr,
                },
            );
        }
        assert!(server.is_established());
        while let Ok((len, _)) = server.send(&mut buf) {
            let _ = client.recv(&mut buf[..len], server_addr, client_addr);
        }
    }
    (client, server)
}

/// Packets `send` returns before it has nothing, up to `cap`.
fn drain(client: &QuicConnection, cap: usize) -> usize {
    let mut buf = vec![0u8; 65_536];
    let mut packets = 0;
    while let Ok(Some(_)) = client.send(&mut buf) {
        packets += 1;
        if packets == cap {
            break;
        }
    }
    packets
}

#[test]
fn a_close_that_quiche_never_sends_ends_the_connection_instead_of_looping() {
    let (client, _server) = completed_client(true);
    client.close(6, "unauthorized");
    let packets = drain(&client, 10_000);
    assert!(packets < 10, "the drain ended: {packets} packets");
    assert!(client.is_closed(), "the connection counts as closed");
    assert!(
        client.close_reason().contains("unauthorized"),
        "{}",
        client.close_reason()
    );
}

#[test]
fn an_ordinary_close_is_sent_and_the_connection_drains() {
    let (client, mut server) = completed_client(false);
    client.close(6, "unauthorized");
    let mut buf = vec![0u8; 65_536];
    let mut packets = 0;
    while let Ok(Some((len, _))) = client.send(&mut buf) {
        packets += 1;
        let _ = server.recv(
            &mut buf[..len],
            quiche::RecvInfo {
                from: CLIENT.parse().unwrap(),
                to: SERVER.parse().unwrap(),
            },
        );
    }
    assert!(packets >= 1, "the close went out");
    assert_eq!(
        server
            .peer_error()
            .map(|error| (error.is_app, error.error_code)),
        Some((true, 6)),
        "the server read the close code"
    );
    assert!(
        !client.is_closed(),
        "closing, not abandoned: it drains first"
    );
}
