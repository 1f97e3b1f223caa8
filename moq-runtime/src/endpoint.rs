//! A QUIC endpoint without sockets: the table of connections on one UDP port, routing
//! datagrams in by connection ID and batching datagrams out by destination.
//!
//! A driver reads datagrams from its socket into [`Endpoint::handle_datagram`], runs due
//! timers with [`Endpoint::handle_timeouts`], sends what [`Endpoint::poll_transmits`]
//! returns, takes established connections from [`Endpoint::accept`], then parks until
//! [`Endpoint::next_timeout`] (or a socket or flush wake). Everything in between (accepting
//! Initials with connection IDs of our own, the timer wheel, which connections have
//! something to send) is here, once, for every driver.
//!
//! **Work proportional to what happened.** A pass of `poll_transmits` visits only the
//! connections that changed since the last pass: those a datagram arrived for, whose timer
//! ran, or whose session wrote (their flush waker queued them). Each is drained once per
//! pass however often it was queued, and only then are its timer re-armed and its state
//! read, under one lock. A connection that did nothing costs nothing.
//!
//! **Batching across connections.** A chat relay has one or two packets per connection per
//! turn, so per-connection GSO batches would be one packet long. `poll_transmits` groups
//! the packets of every connection it drains by destination: consecutive packets to one
//! address, of one size (the last may be shorter), leave as one GSO batch (DESIGN.md,
//! "Thread-per-core").

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use foldhash::HashMap;

use crate::admission::{Admission, Gate, Refused};
use crate::cid::{CID_LEN, CidGenerator, ConnectionId};
use crate::quic::QuicConnection;
use crate::reset::StatelessResetKey;
use crate::timer::TimerWheel;

mod admit;
mod batch;
mod cids;
mod counters;
mod error;
mod send_failures;
mod settle;
mod silence;
mod spare;

use batch::push_packet;
pub use batch::{MAX_GSO_BYTES, MAX_SEGMENTS, Transmit};
pub use counters::EndpointCounters;
pub use error::EndpointError;
use send_failures::SendFailureLog;
use silence::SilenceProbe;
pub use silence::{SILENCE_PROBE, SILENCE_PROBES};
use spare::SpareBuffers;

pub use crate::quiche_config::MAX_DATAGRAM;

/// The most spare connection IDs a peer gets from us at once (besides the one in use):
/// enough to move between networks a few times, without a routing entry per ID the peer
/// would take (its `active_connection_id_limit`).
pub const MAX_SPARE_CIDS: usize = 4;

/// The most datagrams (a GRO train counts once per datagram in it) a driver takes from its
/// sockets per turn before it runs the turn's timers and sends: a flood must not starve
/// the connections it is not for. Every driver keeps it.
pub const RECV_BUDGET: usize = 1024;

/// The code a connection refused while the server stops is closed with (QUIC's
/// CONNECTION_REFUSED, RFC 9000 §20.1; sent as an application close once TLS allows it).
const CONNECTION_REFUSED: u64 = 0x2;

/// The connections on one UDP port.
pub struct Endpoint {
    config: quiche::Config,
    /// Where a replaced certificate comes from, if the server has one that can change.
    certificates: Option<crate::certificates::Watched>,
    /// What is traced of each new server connection (qlog, TLS keys).
    trace: crate::quic_trace::QuicTrace,
    local: SocketAddr,
    cids: CidGenerator,
    /// The admission policy and the counts it is judged by (shared with the server's
    /// other endpoints, if it has several).
    gate: Gate,
    /// This endpoint's server connections whose handshake is in progress.
    half_open: usize,
    /// The worker index in every connection ID it issues.
    worker: u8,
    counters: Arc<EndpointCounters>,
    /// Packets that belong to no connection (Retry), for the next pass.
    stateless: Vec<Transmit>,
    /// How long an established connection may go without our sending before we send a
    /// PING; `None` for never.
    keep_alive: Option<std::time::Duration>,
    /// How often a client connection switches to another connection ID its server gave
    /// it; `None` for never.
    cid_rotation: Option<Duration>,
    connections: Vec<Option<Entry>>,
    free: Vec<usize>,
    by_cid: HashMap<Vec<u8>, usize>,
    timers: TimerWheel<usize>,
    /// Connections whose session wrote since their last drain (their flush wakers).
    flushed: Arc<FlushList>,
    /// Connections the endpoint itself changed since the last pass: a datagram arrived, a
    /// timer ran, a client connection started.
    touched: Vec<usize>,
    /// Counts `poll_transmits` passes, so that each connection is drained once per pass.
    pass: u64,
    /// Server connections whose handshake completed, for the application to take.
    accepted: VecDeque<QuicConnection>,
    len: usize,
    /// Reused buffers: the pass's connection list, expired timers, one packet, the open
    /// GSO batch for each destination (its index in the caller's transmit list), and the
    /// contents of transmits the driver sent and gave back.
    pending: Vec<usize>,
    expired: Vec<usize>,
    packet: Box<[u8]>,
    open_batches: HashMap<(SocketAddr, Option<IpAddr>), usize>,
    spare_contents: SpareBuffers,
    send_failures: SendFailureLog,
    /// Set by [`stop`](Endpoint::stop): no new connection is admitted.
    stopping: bool,
    /// What every stateless reset token of ours is derived from, if this endpoint sends
    /// stateless resets (a server's); `None`: random tokens, no resets.
    reset_key: Option<StatelessResetKey>,
    /// Client connections by the stateless reset token their server gave: a reset carries
    /// no connection ID of ours, only the token, so this is how one finds its connection.
    by_reset_token: HashMap<u128, usize>,
}

struct Entry {
    connection: QuicConnection,
    cids: Vec<Vec<u8>>,
    reported: bool,
    /// The pass that last drained it.
    drained: u64,
    /// A server connection's client address (counted by the gate).
    client: Option<IpAddr>,
    /// When to send a keep-alive PING if nothing happens before.
    keep_alive_at: Option<Instant>,
    /// A client connection that heard data from its server: when to send a PING if
    /// nothing more arrives ([`SILENCE_PROBE`]).
    silence: SilenceProbe,
    /// When a client connection next switches connection IDs (`set_cid_rotation`).
    rotate_cid_at: Option<Instant>,
    /// A client connection's server's stateless reset token, once established.
    reset_token: Option<u128>,
}

#[derive(Default)]
struct FlushList {
    indices: Mutex<Vec<usize>>,
    /// The driver's waker: woken when a connection has something to send.
    driver: Mutex<Option<Waker>>,
}

/// A connection's flush waker: queues the connection and wakes the driver.
struct FlushWaker {
    index: usize,
    list: Arc<FlushList>,
}

impl Endpoint {
    /// An endpoint on `local` whose connections use `config`, whose server connection IDs
    /// name `worker`, and which holds at most `max_connections`.
    pub fn new(
        config: quiche::Config,
        local: SocketAddr,
        worker: u8,
        max_connections: usize,
        now: Instant,
    ) -> Self {
        Self {
            config,
            certificates: None,
            trace: Default::default(),
            local,
            cids: CidGenerator::new(worker),
            gate: Gate::new(
                Admission {
                    max_connections,
                    ..Admission::default()
                },
                now,
            ),
            half_open: 0,
            worker,
            counters: Arc::default(),
            stateless: Vec::new(),
            keep_alive: None,
            cid_rotation: None,
            connections: Vec::new(),
            free: Vec::new(),
            by_cid: HashMap::default(),
            timers: TimerWheel::new(now),
            flushed: Arc::new(FlushList::default()),
            touched: Vec::new(),
            pass: 0,
            accepted: VecDeque::new(),
            len: 0,
            pending: Vec::new(),
            expired: Vec::new(),
            packet: vec![0; MAX_DATAGRAM].into_boxed_slice(),
            open_batches: HashMap::default(),
            spare_contents: SpareBuffers::default(),
            send_failures: SendFailureLog::default(),
            stopping: false,
            reset_key: None,
            by_reset_token: HashMap::default(),
        }
    }

    /// Stops admitting: every later Initial for a new connection is dropped, and server
    /// connections not yet handed to the application (still in their handshake) are
    /// closed now: their clients hear at once, and a stopping server does not wait out
    /// their handshake timeout (review finding F6). Connections already handed over go on
    /// until their sessions close them.
    pub fn stop(&mut self) {
        if self.stopping {
            return;
        }
        self.stopping = true;
        let mut closed = 0usize;
        for (index, entry) in self.connections.iter().enumerate() {
            let Some(entry) = entry else { continue };
            if !entry.reported {
                entry
                    .connection
                    .close(CONNECTION_REFUSED, "the server is stopping");
                self.touched.push(index);
                closed += 1;
            }
        }
        tracing::debug!(local = %self.local, handshakes_closed = closed, "the endpoint stops admitting");
    }

    /// Whether [`stop`](Self::stop) was called.
    pub fn is_stopping(&self) -> bool {
        self.stopping
    }

    /// Records that the kernel refused a send of `datagrams` datagrams to `destination`:
    /// counted in [`EndpointCounters::send_errors`], and logged at warn at most once a
    /// second (with how many more failed in between), so that a failing path is visible
    /// without flooding the log.
    pub fn record_send_failure(
        &mut self,
        error: &std::io::Error,
        destination: SocketAddr,
        datagrams: usize,
        now: Instant,
    ) {
        if datagrams == 1 && error.raw_os_error() == Some(nix::errno::Errno::EMSGSIZE as i32) {
            // A lone datagram larger than the local interface carries: a path MTU probe
            // (they go alone), which quiche counts lost, as it would a probe a router
            // dropped. Not a failure of the path.
            self.counters
                .oversize_refused
                .fetch_add(1, Ordering::Relaxed);
            tracing::trace!(%destination, "a path MTU probe is larger than the interface MTU");
            return;
        }
        self.counters.send_errors.fetch_add(1, Ordering::Relaxed);
        self.counters
            .datagrams_send_failed
            .fetch_add(datagrams as u64, Ordering::Relaxed);
        self.send_failures
            .record(error, destination, datagrams, self.local, now);
    }

    /// Derives every stateless reset token from `key`, and answers a short-header packet
    /// for a connection ID of this worker that it has no connection for with a stateless
    /// reset: a peer of a restarted server (with the same key) hears at once that its
    /// connection is gone, instead of after its idle timeout. A server's endpoints take
    /// one key, which should outlive the process ([`crate::reset`]); without one, tokens
    /// are random and nothing is reset.
    pub fn set_stateless_reset_key(&mut self, key: StatelessResetKey) {
        self.reset_key = Some(key);
    }

    /// Sends a PING on an established connection that has been quiet for `interval`, or
    /// for a third of the peer's idle timeout if that is sooner (`None`: never): a chat
    /// member in a quiet room is otherwise closed by its peer's idle timer.
    pub fn set_keep_alive(&mut self, interval: Option<std::time::Duration>) {
        self.keep_alive = interval;
    }

    /// Has each established client connection switch to another of the connection IDs
    /// its server gave it every `interval` (`None`: never; see
    /// [`QuicConnection::rotate_cid`]).
    pub fn set_cid_rotation(&mut self, interval: Option<Duration>) {
        self.cid_rotation = interval;
    }

    /// Its counters, to read from elsewhere while it runs.
    pub fn counters(&self) -> Arc<EndpointCounters> {
        self.counters.clone()
    }

    /// How many server connections are still in their handshake.
    pub fn half_open(&self) -> usize {
        self.half_open
    }

    /// How many connections are open.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The waker to wake when a connection has something to send (the driver's task).
    pub fn set_waker(&self, waker: &Waker) {
        *lock(&self.flushed.driver) = Some(waker.clone());
    }

    /// Opens a client connection to `peer`, reached as `server_name` (for TLS).
    pub fn connect(
        &mut self,
        server_name: &str,
        peer: SocketAddr,
        now: Instant,
    ) -> Result<QuicConnection, EndpointError> {
        self.check_room()?;
        let scid = self.cids.generate()?;
        let conn = quiche::connect(
            Some(server_name),
            &quiche::ConnectionId::from_ref(scid.as_bytes()),
            self.local,
            peer,
            &mut self.config,
        )?;
        let connection = QuicConnection::new(conn);
        self.insert(
            connection.clone(),
            vec![scid.as_bytes().to_vec()],
            true,
            now,
        );
        Ok(connection)
    }

    /// Handles one datagram received from `from` at local address `to` (the packet info
    /// of a socket bound to a wildcard address; `None` where the driver has none). A
    /// datagram for no known connection is an Initial starting a new one (on a server),
    /// or is dropped. The connection is drained and its timer re-armed by the next
    /// [`poll_transmits`](Self::poll_transmits).
    pub fn handle_datagram(
        &mut self,
        datagram: &mut [u8],
        from: SocketAddr,
        to: Option<IpAddr>,
        now: Instant,
    ) -> Result<(), EndpointError> {
        // The address this packet reached: what a server connection answers from.
        let local = match to {
            Some(ip) if self.local.ip().is_unspecified() => SocketAddr::new(ip, self.local.port()),
            _ => self.local,
        };
        self.counters.datagrams.fetch_add(1, Ordering::Relaxed);
        let header = quiche::Header::from_slice(datagram, CID_LEN)?;
        let index = match self.by_cid.get(header.dcid.as_ref()) {
            Some(&index) => index,
            None if header.ty == quiche::Type::Initial => {
                match self.admit(&header, from, local, now) {
                    Ok(Some(index)) => index,
                    Ok(None) => return Ok(()), // answered with a Retry, or dropped
                    Err(error) => {
                        tracing::debug!(%from, %error, "refusing a new connection");
                        return Err(error);
                    }
                }
            }
            None => {
                // A stray packet: a stateless reset of one of our client connections, one
                // steered wrong (it names another worker), or one for a connection of this
                // worker that is gone, which the peer is told.
                let owner = ConnectionId::from_bytes(&header.dcid).map(|cid| cid.worker());
                if header.ty == quiche::Type::Short {
                    if let Some(index) = self.reset_for_us(datagram) {
                        // The server of one of our client connections lost it.
                        if let Some(entry) = self.connections.get(index).and_then(Option::as_ref) {
                            let _ = entry.connection.recv(datagram, from, self.local);
                            self.touched.push(index);
                        }
                    } else if owner.is_some_and(|w| w != self.worker) {
                        self.counters.misrouted.fetch_add(1, Ordering::Relaxed);
                        tracing::trace!(%from, ?owner, worker = self.worker, "a packet for another worker");
                    } else if let Some(cid) = ConnectionId::from_bytes(&header.dcid) {
                        self.answer_with_reset(cid, datagram.len(), from, local);
                    }
                }
                return Ok(());
            }
        };
        let listening = self.keep_alive.is_some();
        let Some(entry) = self.connections.get_mut(index).and_then(Option::as_mut) else {
            return Ok(());
        };
        // A connection we dialed keeps the address it was created with: quiche takes
        // another local address for a new path.
        let to = if entry.client.is_some() {
            local
        } else {
            self.local
        };
        let result = entry.connection.recv(datagram, from, to);
        // Only data counts: the server's ACK of the PING itself must not arm another.
        if listening && entry.connection.take_heard_data() {
            entry.silence.heard(now);
        }
        if let Err(error) = &result {
            // quiche closes the connection on most errors (with PROTOCOL_VIOLATION for
            // many): this line is the only place that says which.
            if *error != quiche::Error::Done {
                let conn = entry.connection.trace_id();
                tracing::debug!(conn, %from, %error, "quiche refused a packet");
            }
        }
        // Receiving may have produced packets (ACKs, the handshake) and moved the timer.
        self.touched.push(index);
        result.map(|_| ()).map_err(EndpointError::Quic)
    }

    /// Every datagram the changed connections have to send now, batched by destination
    /// and appended to `transmits` (a packet quiche paces for later waits for its time,
    /// and its connection's timer wakes it then). Call it after handling datagrams and
    /// timeouts, and whenever the driver's waker fired; give the transmits back with
    /// [`reclaim`](Self::reclaim) once sent, so that a steady state allocates nothing.
    pub fn poll_transmits(&mut self, now: Instant, transmits: &mut Vec<Transmit>) {
        self.pass += 1;
        self.open_batches.clear();
        transmits.append(&mut self.stateless);
        let mut pending = std::mem::take(&mut self.pending);
        pending.append(&mut self.touched);
        pending.append(&mut lock(&self.flushed.indices));
        for &index in &pending {
            let Some(entry) = self.connections.get_mut(index).and_then(Option::as_mut) else {
                continue;
            };
            if entry.drained == self.pass {
                continue;
            }
            entry.drained = self.pass;
            let connection = entry.connection.clone();
            loop {
                let sent = match connection.send_paced(&mut self.packet, now) {
                    Ok(Some(sent)) => sent,
                    Ok(None) => break,
                    Err(error) => {
                        // Not `Done`: quiche could not build a packet, and the connection
                        // sends nothing until it can (a hang, if it never does).
                        tracing::debug!(conn = connection.trace_id(), %error, "quiche could not send");
                        break;
                    }
                };
                let source = self.source(sent.info.from);
                let packet = &self.packet[..sent.len];
                let batches = &mut self.open_batches;
                push_packet(
                    batches,
                    transmits,
                    &mut self.spare_contents,
                    (sent.info.to, source),
                    packet,
                    sent.mtu_probe,
                );
            }
            self.settle(index, &connection, now);
        }
        pending.clear();
        self.pending = pending;
    }

    /// The source address to ask the kernel for, for packets of a path whose local end is
    /// `local`: its address when the socket is bound to a wildcard and the path's is a
    /// particular one.
    fn source(&self, local: SocketAddr) -> Option<IpAddr> {
        (self.local.ip().is_unspecified() && !local.ip().is_unspecified()).then(|| local.ip())
    }

    /// Takes back transmits the driver sent: their buffers carry the next pass's packets.
    pub fn reclaim(&mut self, sent: impl IntoIterator<Item = Transmit>) {
        for transmit in sent {
            self.spare_contents.give_back(transmit.contents);
        }
    }

    /// When the earliest connection timer is due.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    /// Runs the timers that are due; the connections they fired for may have packets to
    /// send ([`poll_transmits`](Self::poll_transmits)) or may have closed.
    pub fn handle_timeouts(&mut self, now: Instant) {
        let mut expired = std::mem::take(&mut self.expired);
        self.timers.expire(now, &mut expired);
        for &index in &expired {
            if let Some(entry) = self.connections.get_mut(index).and_then(Option::as_mut) {
                entry.connection.on_timeout(now);
                let silent = entry.silence.fire(now);
                if silent {
                    tracing::trace!("the server went silent: a PING shows it where we are");
                }
                if silent || entry.keep_alive_at.is_some_and(|at| at <= now) {
                    entry.connection.ping();
                }
                if entry.rotate_cid_at.is_some_and(|at| at <= now) {
                    entry.connection.rotate_cid();
                    entry.rotate_cid_at = self.cid_rotation.map(|interval| now + interval);
                }
                self.touched.push(index);
            }
        }
        expired.clear();
        self.expired = expired;
    }

    /// The next server connection whose handshake completed.
    pub fn accept(&mut self) -> Option<QuicConnection> {
        self.accepted.pop_front()
    }

    /// Room for one more client connection of this endpoint's own.
    fn check_room(&self) -> Result<(), EndpointError> {
        let max = self.gate.policy().max_connections;
        if self.len >= max {
            return Err(Refused::Full(max).into());
        }
        Ok(())
    }

    fn insert(
        &mut self,
        connection: QuicConnection,
        cids: Vec<Vec<u8>>,
        client: bool,
        now: Instant,
    ) -> usize {
        let index = self.free.pop().unwrap_or_else(|| {
            self.connections.push(None);
            self.connections.len() - 1
        });
        connection.set_flush_waker(&Waker::from(Arc::new(FlushWaker {
            index,
            list: self.flushed.clone(),
        })));
        for cid in &cids {
            self.by_cid.insert(cid.clone(), index);
        }
        self.connections[index] = Some(Entry {
            connection,
            cids,
            reported: client,
            drained: 0,
            client: None,
            keep_alive_at: None,
            silence: SilenceProbe::default(),
            rotate_cid_at: None,
            reset_token: None,
        });
        self.len += 1;
        if let Some(after) = self.connections[index]
            .as_ref()
            .and_then(|entry| entry.connection.timeout())
        {
            self.timers.insert(index, now + after);
        }
        self.touched.push(index);
        index
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("local", &self.local)
            .field("connections", &self.len)
            .finish_non_exhaustive()
    }
}

impl Wake for FlushWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        lock(&self.list.indices).push(self.index);
        let driver = lock(&self.list.driver).clone();
        if let Some(driver) = driver {
            driver.wake();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
