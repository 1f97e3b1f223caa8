//! What the loopback tests share: a hand-built quiche client, and a ring of clients that
//! publish to and read from each other through a server.
#![allow(dead_code, unreachable_pub)] // each test file uses its own part

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::session::SessionConfig;
use moqx_runtime::endpoint::EndpointCounters;
use moqx_runtime::udp::UdpConfig;
use moqx_tokio::{ClientConfig, connect};

/// How long a loopback step may take before the test calls it stuck.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A raw quiche client on a blocking socket.
pub struct RawPeer {
    pub socket: UdpSocket,
    pub conn: quiche::Connection,
}

impl RawPeer {
    pub fn connect(server: SocketAddr) -> Self {
        let mut peer = Self::start(server, b"moq-lite-05");
        assert!(peer.drive(|conn| conn.is_established()), "handshake");
        peer
    }

    /// Starts a handshake offering `alpn`, without waiting for it.
    pub fn start(server: SocketAddr, alpn: &[u8]) -> Self {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        let mut config = quiche::Config::new(quiche::PROTOCOL_VERSION).unwrap();
        config.set_application_protos(&[alpn]).unwrap();
        config.verify_peer(false);
        config.set_max_idle_timeout(10_000);
        config.set_initial_max_data(1 << 20);
        config.set_initial_max_stream_data_bidi_local(1 << 20);
        config.set_initial_max_stream_data_bidi_remote(1 << 20);
        config.set_initial_max_stream_data_uni(1 << 20);
        config.set_initial_max_streams_bidi(100);
        config.set_initial_max_streams_uni(100);
        // Room for the server's spare connection IDs (a client moving between addresses
        // uses one per move).
        config.set_active_connection_id_limit(8);
        let scid = [0x5a; 16];
        let conn = quiche::connect(
            Some("localhost"),
            &quiche::ConnectionId::from_ref(&scid),
            socket.local_addr().unwrap(),
            server,
            &mut config,
        )
        .unwrap();
        Self { socket, conn }
    }

    /// Moves packets until `done`, for at most 10 s.
    pub fn drive(&mut self, mut done: impl FnMut(&mut quiche::Connection) -> bool) -> bool {
        let start = Instant::now();
        let mut buf = [0u8; 65_536];
        while start.elapsed() < Duration::from_secs(10) {
            while let Ok((len, info)) = self.conn.send(&mut buf) {
                self.socket.send_to(&buf[..len], info.to).unwrap();
            }
            if let Ok((len, from)) = self.socket.recv_from(&mut buf) {
                let to = self.socket.local_addr().unwrap();
                let _ = self
                    .conn
                    .recv(&mut buf[..len], quiche::RecvInfo { from, to });
            }
            if self.conn.timeout() == Some(Duration::ZERO) {
                self.conn.on_timeout();
            }
            if done(&mut self.conn) {
                return true;
            }
        }
        false
    }

    /// Writes `bytes` on stream `id`, with FIN if `fin`.
    pub fn write(&mut self, id: u64, bytes: &[u8], fin: bool) {
        let written = self.conn.stream_send(id, bytes, fin).unwrap();
        assert_eq!(written, bytes.len());
    }

    /// Reads stream `id` until it holds `len` bytes (or FIN); returns them and the FIN.
    pub fn read(&mut self, id: u64, len: usize) -> (Vec<u8>, bool) {
        let mut data = Vec::new();
        let mut fin = false;
        self.drive(|conn| {
            let mut buf = [0u8; 4096];
            while let Ok((n, end)) = conn.stream_recv(id, &mut buf) {
                data.extend_from_slice(&buf[..n]);
                fin |= end;
                if end {
                    break;
                }
            }
            data.len() >= len || fin
        });
        (data, fin)
    }

    /// Reads stream `id` to its FIN (for at most 10 s); returns its bytes and whether the
    /// FIN came. A FIN may arrive a round trip after the bytes: the server holds a lone FIN
    /// until its stream's bytes are acknowledged (`moq-runtime/src/quic/fins.rs`).
    pub fn read_to_end(&mut self, id: u64) -> (Vec<u8>, bool) {
        self.read(id, usize::MAX)
    }

    /// The first server-opened uni stream other than `except` that has data.
    pub fn next_uni(&mut self, except: &[u64]) -> u64 {
        let mut found = None;
        self.drive(|conn| {
            found = conn
                .readable()
                .find(|id| id & 3 == 3 && !except.contains(id));
            found.is_some()
        });
        found.expect("a server uni stream")
    }
}

/// Packets that reached a worker other than their connection's, over all workers.
pub fn misrouted(counters: &[Arc<EndpointCounters>]) -> u64 {
    counters
        .iter()
        .map(|counters| counters.misrouted.load(Ordering::Relaxed))
        .sum()
}

/// Every worker received datagrams, and none was for another worker.
pub fn assert_steered(counters: &[Arc<EndpointCounters>]) {
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

/// A client that switches to a spare connection ID of the server's once established,
/// retiring the one in use, then sends its SETUP and reads the server's on the new one:
/// every packet after the switch must reach the worker holding the connection.
pub fn switch_connection_id_and_set_up(server: SocketAddr) {
    let mut client = RawPeer::start(server, b"moq-lite-05");
    // The server gives a spare connection ID once established (NEW_CONNECTION_ID).
    assert!(client.drive(|conn| conn.is_established() && conn.available_dcids() > 0));
    // Retire the one in use: from here every packet carries the new one.
    client.conn.retire_dcid(0).unwrap();
    // SETUP with path "/", and the server's SETUP back: data flows on the new ID.
    client.write(2, &[0x01, 0x04, 0x01, 0x02, 0x01, 0x2f], true);
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
}

/// `clients` clients of `server`, each moving `moves` times to a new source port (a NAT
/// rebinding, a phone changing networks) with path validation: the PATH_RESPONSE comes
/// back only if the packets from the new address reach the worker holding the
/// connection.
pub fn move_clients(server: SocketAddr, clients: u8, moves: u8) {
    for client_index in 0..clients {
        let mut client = RawPeer::start(server, b"moq-lite-05");
        assert!(client.drive(|conn| conn.is_established()));
        for step in 0..moves {
            // A spare connection ID of the server's to move with, and one of ours for
            // the server to answer to.
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
            let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
            socket
                .set_read_timeout(Some(Duration::from_millis(5)))
                .unwrap();
            let moved_to = socket.local_addr().unwrap();
            client.socket = socket;
            client.conn.probe_path(moved_to, server).unwrap();
            assert!(
                client.drive(|conn| conn.is_path_validated(moved_to, server) == Ok(true)),
                "client {client_index}, move {step}: the new path validated"
            );
            client.conn.migrate_source(moved_to).unwrap();
        }
    }
}

/// `peers` clients of the server at `url`: client `i` publishes `peer-i` with one frame,
/// `payload(i)`, and reads `peer-(i+1)`'s. Returns what each one read, once every
/// subscription reached its publisher and every frame arrived.
pub async fn ring(
    url: &str,
    peers: usize,
    payload: impl Fn(usize) -> Bytes,
    udp: UdpConfig,
) -> Vec<Bytes> {
    let mut clients = Vec::new();
    let mut tracks = Vec::new();
    let mut seen_origins = Vec::new();
    for i in 0..peers {
        let published = Origin::new();
        let broadcast = BroadcastProducer::new();
        tracks.push((broadcast.create_track(Track::new("data")), broadcast));
        published
            .publish(format!("peer-{i}"), &tracks[i].1)
            .unwrap();
        let seen = Origin::new();
        clients.push(
            connect(url, {
                let mut client_config = ClientConfig::default();
                client_config.session = SessionConfig::default()
                    .with_publisher(&published)
                    .with_subscriber(&seen);
                client_config.insecure_skip_verify = true;
                client_config.udp = udp.clone();
                client_config
            })
            .await
            .unwrap(),
        );
        seen_origins.push(seen);
    }
    let readers: Vec<_> = (0..peers)
        .map(|i| {
            let seen = seen_origins[i].clone();
            let path = format!("peer-{}", (i + 1) % peers);
            tokio::spawn(async move {
                let broadcast = loop {
                    if let Some(broadcast) = seen.consume_broadcast(path.as_str()) {
                        break broadcast;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                };
                let mut track = broadcast.subscribe_track("data").await.unwrap();
                let mut group = track.next_group().await.unwrap().unwrap();
                group.read_frame().await.unwrap().unwrap().payload
            })
        })
        .collect();
    // Every peer's track is subscribed (through the server) before anything is written.
    tokio::time::timeout(PATIENCE, async {
        while tracks.iter().any(|(track, _)| track.consumer_count() == 0) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("every subscription reaches its publisher");
    for (i, (track, _)) in tracks.iter_mut().enumerate() {
        let mut group = track.append_group();
        group.write(0, payload(i));
        group.finish();
    }
    let mut received = Vec::new();
    for reader in readers {
        received.push(
            tokio::time::timeout(PATIENCE, reader)
                .await
                .expect("the frame arrives")
                .unwrap(),
        );
    }
    drop(clients);
    received
}
