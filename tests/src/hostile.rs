//! A hostile client for the hostile-peer suite (moq-lite-05 unless its ALPN names another
//! protocol, moq-transport among them): raw quiche over a real UDP socket, sending
//! whatever bytes a test scripts (oversized messages, floods, no SETUP at all) and
//! reporting how the server answered: the streams it opened and the code it closed the
//! connection with.
//!
//! Blocking and single-threaded: a test runs it on a blocking thread beside the relay.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// How a hostile client's transport is configured.
#[derive(Debug, Clone)]
pub struct HostileConfig {
    /// The ALPN offered.
    pub alpn: Vec<u8>,
    /// The most uni streams the server may open toward us (MAX_STREAMS_UNI, never
    /// raised past what quiche grants as streams complete).
    pub max_streams_uni: u64,
    /// Flow-control window per stream and per connection, in bytes.
    pub window: u64,
}

impl Default for HostileConfig {
    /// moq-lite-05, 100 uni streams, 1 MiB windows.
    fn default() -> Self {
        Self {
            alpn: b"moq-lite-05".to_vec(),
            max_streams_uni: 100,
            window: 1 << 20,
        }
    }
}

/// A raw client connection.
pub struct HostileClient {
    socket: UdpSocket,
    conn: quiche::Connection,
    buf: Vec<u8>,
    /// The next client uni stream id [`open_uni`](Self::open_uni) gives.
    next_uni: u64,
}

impl std::fmt::Debug for HostileClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostileClient")
            .field("trace_id", &self.conn.trace_id())
            .finish_non_exhaustive()
    }
}

impl HostileClient {
    /// Connects to `server` and completes the handshake (within 10 s), or panics.
    pub fn connect(server: SocketAddr, config: &HostileConfig) -> Self {
        let mut client = Self::start(server, config);
        assert!(
            client.drive(Duration::from_secs(10), |conn| conn.is_established()),
            "the handshake completes"
        );
        client
    }

    /// Sends the first flight of a handshake to `server` and nothing more: a half-open
    /// connection on the server's side.
    pub fn start(server: SocketAddr, config: &HostileConfig) -> Self {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("a loopback socket");
        socket
            .set_read_timeout(Some(Duration::from_millis(2)))
            .expect("a read timeout");
        let mut quic = quiche::Config::new(quiche::PROTOCOL_VERSION).expect("a quiche config");
        quic.set_application_protos(&[&config.alpn]).expect("ALPN");
        quic.verify_peer(false);
        quic.set_max_idle_timeout(30_000);
        quic.set_initial_max_data(config.window);
        quic.set_initial_max_stream_data_bidi_local(config.window);
        quic.set_initial_max_stream_data_bidi_remote(config.window);
        quic.set_initial_max_stream_data_uni(config.window);
        quic.set_initial_max_streams_bidi(100);
        quic.set_initial_max_streams_uni(config.max_streams_uni);
        quic.enable_dgram(true, 1024, 1024);
        let mut scid = [0u8; 16];
        for (i, byte) in scid.iter_mut().enumerate() {
            // Distinct per client and per process; no secrecy needed here.
            *byte = (std::process::id() as usize ^ socket_port(&socket) as usize ^ (i * 31)) as u8;
        }
        let conn = quiche::connect(
            Some("localhost"),
            &quiche::ConnectionId::from_ref(&scid),
            socket.local_addr().expect("bound"),
            server,
            &mut quic,
        )
        .expect("a client connection");
        let mut client = Self {
            socket,
            conn,
            buf: vec![0; 65_536],
            next_uni: 2,
        };
        client.flush();
        client
    }

    /// Moves packets until `done` or `patience` runs out; returns whether `done` held.
    pub fn drive(
        &mut self,
        patience: Duration,
        mut done: impl FnMut(&mut quiche::Connection) -> bool,
    ) -> bool {
        let start = Instant::now();
        while start.elapsed() < patience {
            self.flush();
            if let Ok((len, from)) = self.socket.recv_from(&mut self.buf) {
                let to = self.socket.local_addr().expect("bound");
                let _ = self
                    .conn
                    .recv(&mut self.buf[..len], quiche::RecvInfo { from, to });
            }
            if self.conn.timeout() == Some(Duration::ZERO) {
                self.conn.on_timeout();
            }
            if done(&mut self.conn) {
                self.flush();
                return true;
            }
        }
        false
    }

    /// Sends what quiche has queued.
    pub fn flush(&mut self) {
        while let Ok((len, info)) = self.conn.send(&mut self.buf) {
            let _ = self.socket.send_to(&self.buf[..len], info.to);
        }
    }

    /// Writes `bytes` on stream `id` (as much as flow control takes, moving packets until
    /// it took all, for at most 10 s), with FIN if `fin`.
    pub fn write(&mut self, id: u64, bytes: &[u8], fin: bool) {
        let mut offset = 0;
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            let last = true;
            match self.conn.stream_send(id, &bytes[offset..], fin && last) {
                Ok(written) => offset += written,
                Err(quiche::Error::Done) => {}
                Err(_) => return, // stopped or reset: the server refused it
            }
            if offset >= bytes.len() {
                self.flush();
                return;
            }
            self.drive(Duration::from_millis(5), |_| false);
            if self.conn.is_closed() {
                return;
            }
        }
    }

    /// Sends a QUIC datagram.
    pub fn send_datagram(&mut self, bytes: &[u8]) {
        let _ = self.conn.dgram_send(bytes);
        self.flush();
    }

    /// Reads stream `id` until `len` bytes or its end arrived (within 10 s).
    pub fn read(&mut self, id: u64, len: usize) -> Vec<u8> {
        let mut data = Vec::new();
        self.drive(Duration::from_secs(10), |conn| {
            let mut buf = [0u8; 4096];
            while let Ok((n, fin)) = conn.stream_recv(id, &mut buf) {
                data.extend_from_slice(&buf[..n]);
                if fin {
                    return true;
                }
            }
            data.len() >= len
        });
        data
    }

    /// The first stream the server opened, of the kind `kind` (1: bidi, 3: uni), other
    /// than `except`, that has data (within 10 s).
    pub fn next_server_stream(&mut self, kind: u64, except: &[u64]) -> Option<u64> {
        let mut found = None;
        self.drive(Duration::from_secs(10), |conn| {
            found = conn
                .readable()
                .find(|id| id & 3 == kind && !except.contains(id));
            found.is_some()
        });
        found
    }

    /// The code the server reset stream `id` with, once it did (within 10 s); `None` if
    /// it did not.
    pub fn reset_code(&mut self, id: u64) -> Option<u64> {
        let mut code = None;
        self.drive(Duration::from_secs(10), |conn| {
            let mut buf = [0u8; 4096];
            loop {
                match conn.stream_recv(id, &mut buf) {
                    Ok((_, true)) => return true,
                    Ok(_) => {}
                    Err(quiche::Error::StreamReset(reset)) => {
                        code = Some(reset);
                        return true;
                    }
                    Err(_) => return false,
                }
            }
        });
        code
    }

    /// Opens the next client uni stream: its id.
    pub fn open_uni(&mut self) -> u64 {
        let id = self.next_uni;
        self.next_uni += 4;
        id
    }

    /// The application code the server closed the connection with, once it did (within
    /// `patience`); `None` if it is still open.
    pub fn closed_with(&mut self, patience: Duration) -> Option<u64> {
        self.drive(patience, |conn| {
            conn.is_closed() || conn.peer_error().is_some()
        });
        self.conn.peer_error().map(|error| error.error_code)
    }

    /// The connection itself, for what the helpers do not cover.
    pub fn connection(&mut self) -> &mut quiche::Connection {
        &mut self.conn
    }
}

fn socket_port(socket: &UdpSocket) -> u16 {
    socket.local_addr().map(|a| a.port()).unwrap_or(0)
}
