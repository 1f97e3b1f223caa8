//! The strict relay: a moq-lite relay on raw QUIC (-05, -04 and -03, chosen by ALPN),
//! written on quiche and the hand-made [`wire`] layer, that behaves toward its clients the
//! way a deployed relay does and reports every way a client breaks the protocol.
//!
//! What it does, as a deployed relay does (`shared/spec/moq-lite-05.md`):
//!
//! - on -05 it waits for the client's SETUP before anything else, discarding
//!   (STOP_SENDING) any other uni stream that comes first; then sends its own SETUP. On
//!   -03 and -04 there is no SETUP: the session begins with the connection, and a Setup,
//!   Track or Fetch stream from the client is a violation;
//! - right after, it opens an announce stream to **every** client (ANNOUNCE_REQUEST for
//!   `""`, excluding its own origin) and **closes the whole session with code 1** if that
//!   stream fails in any way: a reset, STOP_SENDING, or bytes it cannot decode;
//! - it answers the client's own ANNOUNCE_REQUESTs with ANNOUNCE_OK, the live set, then
//!   every change;
//! - a client's SUBSCRIBE is forwarded to the broadcast's publisher as TRACK first (on
//!   -05), then SUBSCRIBE with an id of the relay's, and the publisher's groups are
//!   forwarded back frame by frame under the subscriber's id; SUBSCRIBE_UPDATEs, the
//!   responses and the cancel (FIN) travel through; a lone TRACK is forwarded the same way.
//!   Between versions it translates as a deployed relay does: frame timestamps dropped or
//!   zero, SUBSCRIBE_OK for a -03/-04 subscriber, TRACK_INFO defaults for a -03/-04
//!   publisher;
//! - on -03 and -04, a second active ANNOUNCE for a path a client already announced
//!   closes its session (Duplicate, 12), and a -03/-04 publisher must answer a SUBSCRIBE
//!   with SUBSCRIBE_OK before any other reply.
//!
//! Every message it reads is decoded strictly; whatever a client sends that a deployed
//! peer would refuse is a *violation*: printed, kept, and (with `exit_on_violation`) the
//! end of the process, so that a test driving it as a child process sees it at once.
//! It serves tests only: one thread, a loop polling every connection.

// A test peer: what it sees, it reports on stderr, where a failing test's output shows it.
#![allow(clippy::print_stderr)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod announce;
mod forward;
mod setup;

use super::wire::{self, GroupHeader, Lite, Subscribe, Track};

/// What the strict relay is told.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it listens (UDP).
    pub bind: SocketAddr,
    /// Exit the process (status 1) at the first violation.
    pub exit_on_violation: bool,
    /// Print every session's start and end on stderr.
    pub verbose: bool,
}

/// Error codes it sends (the moq-lite code space).
mod code {
    pub(super) const CANCEL: u64 = 0;
    pub(super) const REQUIRED_EXTENSION: u64 = 1;
    pub(super) const DECODE: u64 = 5;
    pub(super) const UNEXPECTED_STREAM: u64 = 10;
    pub(super) const DUPLICATE: u64 = 12;
    pub(super) const NOT_FOUND: u64 = 13;
    pub(super) const UNSUPPORTED: u64 = 17;
}

/// The length of the connection IDs the relay gives itself.
const SCID_LEN: usize = 16;

/// SETUP parameter id of the path (raw QUIC carries the session's root here).
const SETUP_PATH: u64 = 2;

/// A moq-lite-05 relay as strict as a deployed one. See the module documentation.
pub struct StrictRelay {
    socket: UdpSocket,
    local: SocketAddr,
    config: quiche::Config,
    settings: Config,
    clients: Vec<Option<Client>>,
    by_cid: HashMap<Vec<u8>, usize>,
    /// Live broadcasts by full path: who publishes each, and its route.
    broadcasts: BTreeMap<String, Published>,
    links: HashMap<u64, Link>,
    next_link: u64,
    /// (publisher, the relay's subscribe id toward it) → link.
    by_upstream_id: HashMap<(usize, u64), u64>,
    origin_id: u64,
    next_cid: u64,
    report: Arc<Mutex<Report>>,
}

/// What the strict relay saw, for a test to check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Every violation, as printed.
    pub violations: Vec<String>,
    /// Sessions whose client sent SETUP.
    pub sessions: usize,
    /// Sessions whose client answered the relay's announce stream with ANNOUNCE_OK (on -03
    /// and -04, which have none, every session once it began).
    pub announce_answered: usize,
}

/// A strict relay serving on a thread of its own, for in-process tests.
#[derive(Debug)]
pub struct RunningRelay {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its certificate's SHA-256 fingerprint (hex), for clients to pin.
    pub fingerprint: String,
    report: Arc<Mutex<Report>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RunningRelay {
    /// What it saw so far.
    pub fn report(&self) -> Report {
        self.report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops it; returns what it saw.
    pub fn stop(mut self) -> Report {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.report()
    }
}

impl Drop for RunningRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for StrictRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StrictRelay")
            .field("local", &self.local)
            .field("clients", &self.clients.iter().flatten().count())
            .field("report", &self.report())
            .finish_non_exhaustive()
    }
}

struct Published {
    client: usize,
    hops: Vec<u64>,
}

struct Client {
    conn: quiche::Connection,
    name: String,
    /// Its version, from the ALPN once the handshake is done.
    lite: Lite,
    /// The session began: its SETUP arrived (-05), or its handshake completed (-03/-04).
    setup_received: bool,
    /// The session's root: its SETUP Path, normalized.
    root: String,
    streams: HashMap<u64, Stream>,
    next_bidi: u64,
    next_uni: u64,
    /// The relay's announce stream to this client, once opened.
    announce: Option<u64>,
    /// The client's origin id, from its ANNOUNCE_OK.
    hop_id: Option<u64>,
    /// ANNOUNCEs still due as the initial set.
    initial_left: u64,
    /// Full paths it announced active.
    announced: HashSet<String>,
    next_subscribe_id: u64,
    /// Group streams from publishers waiting for stream credit toward this client.
    waiting_groups: Vec<(usize, u64)>,
    gone: bool,
}

#[derive(Default)]
struct Stream {
    role: Role,
    rx: Vec<u8>,
    rx_fin: bool,
    rx_reset: Option<u64>,
    tx: Vec<u8>,
    /// FIN once `tx` is written.
    tx_fin: bool,
    tx_done: bool,
}

#[derive(Default, Clone, PartialEq, Eq)]
enum Role {
    /// A stream the client opened whose type is not read yet.
    #[default]
    Unknown,
    /// The client's SETUP.
    SetupIn,
    /// The relay's SETUP, or anything only written.
    WriteOnly,
    /// Read and thrown away.
    Discard,
    /// The relay's announce stream to the client.
    AnnounceOut,
    /// The client's announce stream to the relay, before its ANNOUNCE_REQUEST arrived.
    AnnounceAsked,
    /// The client's announce stream once answered: its full prefix, the origin it asked
    /// to leave out, and the paths it was told are active.
    AnnounceIn {
        prefix: String,
        exclude_hop: u64,
        active: HashSet<String>,
    },
    /// The client's TRACK or SUBSCRIBE, served through `link`.
    RequestIn { link: u64 },
    /// The relay's TRACK toward a publisher, for `link`.
    TrackOut { link: u64 },
    /// The relay's SUBSCRIBE toward a publisher, for `link`.
    SubscribeOut { link: u64 },
    /// A publisher's group: its header once read, and where it is forwarded once a
    /// stream toward the subscriber is open.
    GroupIn {
        header: Option<GroupHeader>,
        to: Option<(usize, u64)>,
    },
    /// The relay's group stream toward a subscriber, fed from `from`.
    GroupOut { from: (usize, u64) },
}

/// A TRACK or SUBSCRIBE the relay forwards from a subscriber to a publisher.
struct Link {
    /// The subscriber and its request stream.
    down: (usize, u64),
    publisher: usize,
    /// The broadcast's path relative to the publisher's root, and the track.
    track: Track,
    /// For a SUBSCRIBE: the request, and the relay's id for it toward the publisher.
    subscribe: Option<(Subscribe, u64)>,
    /// The publisher replied on the SUBSCRIBE stream (a -03/-04 publisher's first reply
    /// must be SUBSCRIBE_OK).
    answered: bool,
    /// The highest group sequence forwarded, for the SUBSCRIBE_END a -05 subscriber of a
    /// -03/-04 publisher is owed when the publisher's FIN ends the track.
    highest_group: Option<u64>,
    up_track: Option<u64>,
    up_subscribe: Option<u64>,
}

impl StrictRelay {
    /// Binds and loads a fresh self-signed certificate; returns the relay and the
    /// certificate's fingerprint (for clients to pin).
    pub fn bind(settings: Config) -> Result<(Self, String), String> {
        let socket = UdpSocket::bind(settings.bind).map_err(|e| format!("binding: {e}"))?;
        let local = socket.local_addr().map_err(|e| e.to_string())?;
        let certificate =
            moqx_runtime::tls::Certificate::self_signed(&["localhost".into(), "127.0.0.1".into()])
                .map_err(|e| e.to_string())?;
        // A directory of its own: relays bound side by side in one process (the tests)
        // must not read each other's half-written files.
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let (chain, key) = (dir.path().join("chain.pem"), dir.path().join("key.pem"));
        std::fs::write(&chain, certificate.chain_pem()).map_err(|e| e.to_string())?;
        std::fs::write(&key, certificate.key_pem()).map_err(|e| e.to_string())?;
        let mut config =
            quiche::Config::new(quiche::PROTOCOL_VERSION).map_err(|e| e.to_string())?;
        config
            .load_cert_chain_from_pem_file(&chain.to_string_lossy())
            .and_then(|()| config.load_priv_key_from_pem_file(&key.to_string_lossy()))
            .map_err(|e| format!("loading the certificate: {e}"))?;
        drop(dir);
        config
            .set_application_protos(&Lite::ALL.map(Lite::alpn))
            .map_err(|e| e.to_string())?;
        config.set_max_recv_udp_payload_size(1350);
        config.set_max_send_udp_payload_size(1350);
        deployed_limits(&mut config);
        let origin_id = (seed() >> 11).max(1);
        let relay = Self {
            socket,
            local,
            config,
            settings,
            clients: Vec::new(),
            by_cid: HashMap::new(),
            broadcasts: BTreeMap::new(),
            links: HashMap::new(),
            next_link: 0,
            by_upstream_id: HashMap::new(),
            origin_id,
            next_cid: seed(),
            report: Arc::default(),
        };
        Ok((relay, certificate.fingerprint().to_string()))
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// What it saw so far.
    pub fn report(&self) -> Report {
        self.report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Serves on a thread of its own until [`RunningRelay::stop`].
    pub fn spawn(mut self, fingerprint: String) -> RunningRelay {
        let stop = Arc::new(AtomicBool::new(false));
        let (addr, report, halt) = (self.local, self.report.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                self.turn();
            }
        });
        RunningRelay {
            addr,
            fingerprint,
            report,
            stop,
            thread: Some(thread),
        }
    }

    fn note(&self, change: impl FnOnce(&mut Report)) {
        change(&mut self.report.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Serves until the process ends.
    pub fn run(mut self) -> ! {
        loop {
            self.turn();
        }
    }

    /// One turn: wait for a datagram (or the next timer), feed it, then move every
    /// connection's streams and packets.
    pub fn turn(&mut self) {
        let wait = self
            .clients
            .iter()
            .flatten()
            .filter_map(|client| client.conn.timeout())
            .min()
            .unwrap_or(Duration::from_millis(50))
            .clamp(Duration::from_millis(1), Duration::from_millis(50));
        let _ = self.socket.set_read_timeout(Some(wait));
        let mut buf = vec![0u8; 65_536];
        let mut first = true;
        loop {
            if !first {
                let _ = self.socket.set_nonblocking(true);
            }
            let received = self.socket.recv_from(&mut buf);
            if !first {
                let _ = self.socket.set_nonblocking(false);
            }
            first = false;
            match received {
                Ok((len, from)) => self.handle_datagram(&mut buf[..len], from),
                Err(_) => break,
            }
        }
        for index in 0..self.clients.len() {
            if let Some(client) = self.clients[index].as_mut()
                && client.conn.timeout() == Some(Duration::ZERO)
            {
                client.conn.on_timeout();
            }
            self.serve(index);
        }
        self.flush_packets();
    }

    fn handle_datagram(&mut self, datagram: &mut [u8], from: SocketAddr) {
        let Ok(header) = quiche::Header::from_slice(datagram, SCID_LEN) else {
            return;
        };
        let index = match self.by_cid.get(header.dcid.as_ref()) {
            Some(&index) => index,
            None if header.ty == quiche::Type::Initial => {
                self.next_cid = self
                    .next_cid
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1);
                let mut scid = [0u8; SCID_LEN];
                scid[..8].copy_from_slice(&self.next_cid.to_le_bytes());
                scid[8..].copy_from_slice(&(self.clients.len() as u64).to_le_bytes());
                let Ok(conn) = quiche::accept(
                    &quiche::ConnectionId::from_ref(&scid),
                    None,
                    self.local,
                    from,
                    &mut self.config,
                ) else {
                    return;
                };
                let index = self.clients.len();
                self.clients.push(Some(Client {
                    conn,
                    name: format!("client {index} ({from})"),
                    lite: Lite::V05,
                    setup_received: false,
                    root: String::new(),
                    streams: HashMap::new(),
                    next_bidi: 1,
                    next_uni: 3,
                    announce: None,
                    hop_id: None,
                    initial_left: 0,
                    announced: HashSet::new(),
                    next_subscribe_id: 0,
                    waiting_groups: Vec::new(),
                    gone: false,
                }));
                self.by_cid.insert(scid.to_vec(), index);
                self.by_cid.insert(header.dcid.to_vec(), index);
                index
            }
            None => return,
        };
        if let Some(client) = self.clients[index].as_mut() {
            let info = quiche::RecvInfo {
                from,
                to: self.local,
            };
            let _ = client.conn.recv(datagram, info);
        }
    }

    fn flush_packets(&mut self) {
        let mut out = [0u8; 1500];
        for client in self.clients.iter_mut().flatten() {
            while let Ok((len, info)) = client.conn.send(&mut out) {
                let _ = self.socket.send_to(&out[..len], info.to);
            }
        }
    }

    /// Records a violation by `index`: printed, kept, and fatal to the process if so
    /// configured.
    fn violation(&mut self, index: usize, what: String) {
        let name = self.client(index).map_or("?".into(), |c| c.name.clone());
        let line = format!("strict-relay: VIOLATION by {name}: {what}");
        eprintln!("{line}");
        self.note(|report| report.violations.push(line));
        if self.settings.exit_on_violation {
            std::process::exit(1);
        }
    }

    fn client(&self, index: usize) -> Option<&Client> {
        self.clients.get(index).and_then(Option::as_ref)
    }

    fn client_mut(&mut self, index: usize) -> Option<&mut Client> {
        self.clients.get_mut(index).and_then(Option::as_mut)
    }

    /// Reads, handles and writes every stream of client `index`; cleans up after it once
    /// its connection closed.
    fn serve(&mut self, index: usize) {
        let verbose = self.settings.verbose;
        let Some(client) = self.client_mut(index) else {
            return;
        };
        if client.conn.is_closed() {
            if !client.gone {
                client.gone = true;
                if verbose {
                    let error = client.conn.peer_error().or(client.conn.local_error());
                    eprintln!("strict-relay: {} closed: {error:?}", client.name);
                }
                self.forget(index);
            }
            return;
        }
        if !client.conn.is_established() {
            return;
        }
        if !client.setup_received {
            if let Some(lite) = Lite::from_alpn(client.conn.application_proto()) {
                client.lite = lite;
            }
            if !client.lite.is_05() {
                // No SETUP before -05: the session begins now, at the relay's root.
                self.begin(index, String::new());
            }
        }
        let Some(client) = self.client_mut(index) else {
            return;
        };
        let readable: Vec<u64> = client.conn.readable().collect();
        for id in readable {
            self.read_stream(index, id);
            self.handle_stream(index, id);
        }
        self.watch_announce_stream(index);
        self.retry_waiting_groups(index);
        self.write_streams(index);
    }

    /// Moves what stream `id` of client `index` has into its buffer (creating the stream
    /// if the client opened it).
    fn read_stream(&mut self, index: usize, id: u64) {
        let Some(client) = self.client_mut(index) else {
            return;
        };
        let stream = client.streams.entry(id).or_default();
        let mut buf = [0u8; 16 * 1024];
        loop {
            match client.conn.stream_recv(id, &mut buf) {
                Ok((len, fin)) => {
                    stream.rx.extend_from_slice(&buf[..len]);
                    stream.rx_fin |= fin;
                    if fin {
                        break;
                    }
                }
                Err(quiche::Error::StreamReset(code)) => {
                    stream.rx_reset = Some(code);
                    break;
                }
                Err(_) => break,
            }
        }
    }

    fn handle_stream(&mut self, index: usize, id: u64) {
        let Some(role) = self.stream(index, id).map(|s| s.role.clone()) else {
            return;
        };
        match role {
            Role::Unknown => self.read_stream_type(index, id),
            Role::SetupIn => self.read_setup(index, id),
            Role::Discard => {
                if let Some(stream) = self.stream_mut(index, id) {
                    stream.rx.clear();
                }
            }
            Role::WriteOnly | Role::GroupOut { .. } => {}
            Role::AnnounceOut => self.read_announces(index, id),
            Role::AnnounceAsked | Role::AnnounceIn { .. } => self.read_announce_in(index, id),
            Role::RequestIn { link } => self.read_request_in(index, id, link),
            Role::TrackOut { link } => self.read_track_info(index, id, link),
            Role::SubscribeOut { link } => self.read_subscribe_responses(index, id, link),
            Role::GroupIn { .. } => self.forward_group(index, id),
        }
    }

    fn stream(&self, index: usize, id: u64) -> Option<&Stream> {
        self.client(index)?.streams.get(&id)
    }

    fn stream_mut(&mut self, index: usize, id: u64) -> Option<&mut Stream> {
        self.client_mut(index)?.streams.get_mut(&id)
    }

    /// Closes client `index`'s session with `code`.
    fn close(&mut self, index: usize, code: u64, reason: &str) {
        if let Some(client) = self.client_mut(index) {
            let _ = client.conn.close(true, code, reason.as_bytes());
        }
    }

    /// Writes what every stream of client `index` has queued.
    fn write_streams(&mut self, index: usize) {
        let Some(client) = self.client_mut(index) else {
            return;
        };
        let mut stopped = Vec::new();
        for (&id, stream) in client.streams.iter_mut() {
            if stream.tx_done || (stream.tx.is_empty() && !stream.tx_fin) {
                continue;
            }
            match client.conn.stream_send(id, &stream.tx, stream.tx_fin) {
                Ok(written) => {
                    stream.tx.drain(..written);
                    if stream.tx.is_empty() && stream.tx_fin {
                        stream.tx_done = true;
                    }
                }
                Err(quiche::Error::Done) => {}
                Err(quiche::Error::StreamStopped(_)) => {
                    stream.tx.clear();
                    stream.tx_done = true;
                    stopped.push((id, stream.role.clone()));
                }
                Err(_) => {
                    stream.tx.clear();
                    stream.tx_done = true;
                }
            }
        }
        for (id, role) in stopped {
            match role {
                // The subscriber does not want this group: stop reading it upstream.
                Role::GroupOut { from } => {
                    if let Some(client) = self.client_mut(from.0) {
                        let _ = client
                            .conn
                            .stream_shutdown(from.1, quiche::Shutdown::Read, 0);
                        if let Some(stream) = client.streams.get_mut(&from.1) {
                            stream.role = Role::Discard;
                        }
                    }
                }
                Role::AnnounceOut => {
                    self.announce_failed(index, "stopped".into());
                }
                Role::RequestIn { link } => self.end_link(link, Some(code::CANCEL)),
                _ => {
                    let _ = id;
                }
            }
        }
    }
}

/// The transport limits a deployed moq-lite peer configures (1,024 streams of each kind,
/// generous windows, datagrams on, 30 s idle): for the strict relay and for test clients
/// that stand in for deployed ones.
pub fn deployed_limits(config: &mut quiche::Config) {
    config.set_max_idle_timeout(30_000);
    config.set_initial_max_data(64 << 20);
    config.set_initial_max_stream_data_bidi_local(4 << 20);
    config.set_initial_max_stream_data_bidi_remote(4 << 20);
    config.set_initial_max_stream_data_uni(4 << 20);
    config.set_initial_max_streams_bidi(1024);
    config.set_initial_max_streams_uni(1024);
    config.enable_dgram(true, 1024, 1024);
}

impl Client {
    /// Opens the relay's next stream toward this client (`uni` or bidi) with `role`,
    /// queuing `tx` (and the FIN behind it if `fin`); returns its id.
    fn open(&mut self, uni: bool, role: Role, tx: Vec<u8>, fin: bool) -> u64 {
        let counter = if uni {
            &mut self.next_uni
        } else {
            &mut self.next_bidi
        };
        let id = *counter;
        *counter += 4;
        let stream = Stream {
            role,
            tx,
            tx_fin: fin,
            ..Stream::default()
        };
        self.streams.insert(id, stream);
        id
    }
}

/// Resets both halves of a bidi stream (or the one half a uni stream has) with `code`.
fn refuse(conn: &mut quiche::Connection, id: u64, code: u64) {
    let _ = conn.stream_shutdown(id, quiche::Shutdown::Write, code);
    let _ = conn.stream_shutdown(id, quiche::Shutdown::Read, code);
}

fn write_type(out: &mut Vec<u8>, kind: u64) {
    wire::write_varint(out, kind);
}

/// Entropy enough for connection IDs and an origin id in a test peer.
fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.finish()
}
