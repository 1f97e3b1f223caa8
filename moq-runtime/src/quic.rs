//! The quiche adapter for raw QUIC: `moqx_net::transport` over a `quiche::Connection`.
//!
//! A [`QuicConnection`] wraps one quiche connection behind a lock, shared by the endpoint
//! that moves its packets ([`recv`](QuicConnection::recv), [`send`](QuicConnection::send),
//! [`on_timeout`](QuicConnection::on_timeout)) and by the [`QuicSession`] and stream
//! handles a session machine uses. The lock is a plain mutex: DESIGN.md measured a mutex
//! around the connection at 1–3.5 % over passing it as context, and far cheaper than a
//! channel to the driver.
//!
//! # Work proportional to what happened
//!
//! A relay opens one stream per group per subscriber (in chat, one per message), so
//! whatever the adapter does per packet or keeps per stream is paid per message, forever:
//!
//! - **Per packet**, only streams quiche reports an event for are touched: readable
//!   streams come from `stream_readable_next` (an edge: reported once each time data
//!   arrives on a drained stream), which surfaces new peer streams and wakes parked
//!   readers. Writers are parked only while they wait (for flow-control credit, or for the
//!   peer's STOP_SENDING while their data is not there yet); the few parked for credit are
//!   checked each packet, those watching for STOP_SENDING only when the peer's count of
//!   them moved.
//! - **Per stream**, the bookkeeping (its parked reader and writer) lives exactly as long
//!   as a handle to the stream does: it is created when the stream is opened or surfaced
//!   and released when its last handle drops. A send half dropped before its end resets
//!   the stream with code 0. A receive half dropped before its end has the rest of the
//!   stream read and discarded as it arrives, until the peer's FIN or reset: quiche (up
//!   to at least 0.30, cloudflare/quiche#1968) never frees a stream it was asked to stop
//!   sending, nor returns its stream credit, so STOP_SENDING is kept for an explicit
//!   [`RecvStream::stop`](moqx_net::transport::RecvStream::stop) (a protocol refusal) and
//!   not used to say "no longer interested".
//!
//! Wakers always run after the lock is released. After a session writes, the endpoint's
//! flush waker (set with [`QuicConnection::set_flush_waker`]) is woken once, until the
//! endpoint's next [`send`](QuicConnection::send).
//!
//! Create the [`QuicSession`] once the handshake is done (the negotiated protocol is read
//! then).

use std::collections::{BTreeSet, VecDeque};

use foldhash::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Waker;
use std::time::{Duration, Instant};

use bytes::Bytes;
use moqx_kio::sync::Mutex;
use moqx_kio::{WaiterList, WaiterSlot};

use crate::urgency::Urgencies;

mod cids;
mod closing;
mod connection;
mod fins;
mod migration;
mod pacing;
mod parking;
mod quirks;
mod send;
mod stall;
#[cfg(test)]
mod tests;
mod unsendable;

pub use parking::LossWorkarounds;
pub use send::Datagram;
mod state;
mod streams;

/// One quiche connection, shared by its endpoint and its session.
#[derive(Clone)]
pub struct QuicConnection {
    shared: Arc<Shared>,
}

/// The session side of a [`QuicConnection`]: implements `moqx_net::transport::Session`.
/// Clones are handles to the same connection.
#[derive(Clone)]
pub struct QuicSession {
    connection: QuicConnection,
    protocol: Option<String>,
}

/// The sending half of a QUIC stream. Dropping it before
/// [`finish`](moqx_net::transport::SendStream::finish) or
/// [`reset`](moqx_net::transport::SendStream::reset) resets the stream with code 0.
pub struct QuicSendStream {
    connection: QuicConnection,
    id: u64,
    /// Finished or reset: nothing to do when the handle drops.
    ended: bool,
    /// When bytes were last written here (`None`: never): a FIN after them need not be
    /// held if they are still queued, or acknowledged by now (see `quic/fins.rs`).
    last_write: Option<fins::LastWrite>,
    /// The connection's park sweeps this handle has seen: when another ran, the stream
    /// may be parked and gets its place back before its next write (`quic/parking.rs`).
    park_sweeps_seen: u64,
}

/// The receiving half of a QUIC stream. Dropping it before the stream's end discards the
/// rest of the stream as it arrives (see the module documentation for why not
/// STOP_SENDING).
pub struct QuicRecvStream {
    connection: QuicConnection,
    id: u64,
    /// The FIN or a reset was read, or the stream was stopped.
    ended: bool,
}

/// What the endpoint needs to know about a connection after it changed, read under one
/// lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionStatus {
    /// Closed for good: the endpoint forgets it.
    pub closed: bool,
    /// The handshake completed.
    pub established: bool,
    /// How long until [`on_timeout`](QuicConnection::on_timeout) is due, if a timer is set.
    pub timeout: Option<Duration>,
    /// The idle timeout the peer announced (0 or absent: none), which closes the
    /// connection if the peer hears nothing from us that long.
    pub peer_idle_timeout: Option<Duration>,
    /// When a scheduled close is due ([`QuicConnection::close_at`]).
    pub close_at: Option<Instant>,
    /// When a FIN held back until its stream's bytes are acknowledged is due to be looked
    /// at again ([`QuicConnection::on_timeout`] writes it).
    pub held_fin_at: Option<Instant>,
    /// When bytes quiche kept of those written are due to be looked at again
    /// ([`QuicConnection::on_timeout`] parks every stream if they still have not left).
    pub kept_bytes_check_at: Option<Instant>,
    /// When the packet held for its send time is due ([`QuicConnection::send_paced`]).
    pub paced_at: Option<Instant>,
    /// When our CONNECTION_CLOSE goes again if the peer stays silent
    /// ([`QuicConnection::on_timeout`] sends it).
    pub close_resend_at: Option<Instant>,
    /// How many more connection IDs the peer would take from us (its
    /// `active_connection_id_limit` less those it holds): [`QuicConnection::issue_cid`].
    pub cids_wanted: usize,
    /// Connection IDs of ours the peer retired, to take back with
    /// [`QuicConnection::retired_cid`].
    pub cids_retired: usize,
}

/// What a [`QuicConnection`] keeps per stream: see [`QuicConnection::bookkeeping`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bookkeeping {
    /// Streams with a live handle, or waiting to be accepted.
    pub streams: usize,
    /// Streams the peer opened that the session has not accepted yet.
    pub waiting_to_be_accepted: usize,
    /// Writers parked for credit or watching for STOP_SENDING.
    pub parked_writers: usize,
    /// Peer stream ids below the highest seen that have not shown up yet.
    pub skipped_peer_streams: usize,
    /// Received datagrams the session has not read (at most 256; none are kept before
    /// the session first asks for one).
    pub queued_datagrams: usize,
    /// Received datagrams dropped: unread (nobody asked), or the oldest of a full queue.
    pub datagrams_dropped: u64,
    /// Streams whose FIN is written, noted until quiche lets them go (so that they can be
    /// parked after a loss, `quic/parking.rs`): pruned whenever the list doubles, so it
    /// stays under twice the streams with bytes in flight (or 64), whatever the history.
    pub finished_streams: usize,
}

struct Shared {
    state: Mutex<State>,
    /// Set from a session's first write after the endpoint's last `send`; cleared by `send`.
    flush_pending: AtomicBool,
    /// The endpoint's waker for this connection.
    flush_waker: std::sync::Mutex<Option<Waker>>,
    accept_uni: WaiterList,
    accept_bidi: WaiterList,
    credit: WaiterList,
    datagrams: WaiterList,
    closed: WaiterList,
    /// Tasks waiting for the handshake: woken once it completes or the connection closes.
    established: WaiterList,
}

struct State {
    conn: quiche::Connection,
    server: bool,
    /// The streams some handle (or an accept queue) still refers to.
    streams: HashMap<u64, StreamEntry>,
    incoming_uni: VecDeque<u64>,
    incoming_bidi: VecDeque<u64>,
    peer_uni: PeerStreams,
    peer_bidi: PeerStreams,
    next_uni: u64,
    next_bidi: u64,
    /// Streams whose writer waits for flow-control credit.
    credit_waiters: Vec<u64>,
    /// Streams whose writer waits only for the peer's STOP_SENDING.
    stop_watchers: Vec<u64>,
    /// The peer's STOP_SENDING count when the watchers were last checked.
    stops_seen: u64,
    received_datagrams: VecDeque<Bytes>,
    /// The session asked for a datagram at least once: until then none is kept.
    datagrams_wanted: bool,
    /// Datagrams dropped: nobody reads them, or the queue was full (the oldest go).
    datagrams_dropped: u64,
    /// A FIN was queued with no bytes of its own and may not be in a packet yet; see
    /// [`State::emit_before_acks`].
    lone_fin: bool,
    /// FINs with no bytes of their own, held until the bytes before them are
    /// acknowledged (see `fins.rs`).
    held_fins: fins::HeldFins,
    /// The largest UDP payload the path is known to carry (quiche's PMTU discovery
    /// reports each change): a larger packet is a probe.
    path_mtu: usize,
    /// Packets quiche produced so far: a stream written to after the last of them has
    /// its bytes still queued.
    packets_emitted: u64,
    /// The connection's lost packets and probe timeouts at the last look (see
    /// `parking.rs`).
    losses_seen: usize,
    /// The connection's probe timeouts at the last look after its timers ran.
    probes_seen: usize,
    /// How many times streams were parked: a send handle that saw the last sweep has
    /// nothing to unpark.
    park_sweeps: u64,
    /// Streams whose FIN is written that quiche may still keep (`parking.rs`).
    finished: parking::FinishedStreams,
    /// Open streams parked (`parking.rs`).
    open_parked: usize,
    /// A parked stream may have something to send behind a stuck one: set by each park
    /// sweep, cleared once asking past them found nothing with room to send it
    /// (`parking.rs`).
    parked_may_send: bool,
    /// `send` calls made past parked streams after quiche said it was done.
    sends_past_parked: u64,
    /// Bytes quiche kept of those written, and the check of them due (`stall.rs`).
    kept: stall::KeptBytes,
    /// The stream bytes the connection had resent at the last look (`parking.rs`).
    resent_seen: u64,
    /// The bytes the peer acknowledged at the last look.
    acked_seen: u64,
    /// The connection's probe timeouts when it last saw new bytes acknowledged.
    probes_at_ack: usize,
    /// The bytes the peer had acknowledged when the connection last lost packets.
    acked_at_loss: u64,
    /// The peer ended the connection with a stateless reset: it no longer has it.
    reset_by_peer: bool,
    /// Packets emitted ahead of the endpoint's next transmit pass; sent before any others.
    outbox: VecDeque<(Vec<u8>, quiche::SendInfo)>,
    /// The packet held until the send time quiche gave it (`pacing.rs`).
    paced: pacing::Paced,
    /// Every waiter was told the connection closed.
    close_announced: bool,
    /// The handshake's waiters were told it completed.
    established_announced: bool,
    /// The quiche urgency of each prioritized send stream (moq-lite's order).
    urgencies: Urgencies,
    /// Reused: the urgencies quiche must be told of after a change.
    urgency_changes: Vec<(u64, u8)>,
    /// A close scheduled for later ([`QuicConnection::close_at`]): when, the code, why.
    close_at: Option<(Instant, u64, String)>,
    /// Long-header packets quiche produced since the connection started closing; see
    /// [`State::next_packet`].
    closing_long_headers: u32,
    /// Given up on: quiche kept producing packets after a close without ever finishing.
    /// Sends nothing more, and counts as closed.
    abandoned: bool,
    /// The datagram that carried our CONNECTION_CLOSE, sent again if the peer goes on
    /// sending (`closing.rs`). Boxed: only a closing connection has one, and every open
    /// connection would carry its 150 bytes.
    close_packet: Option<Box<closing::ClosePacket>>,
    /// The connection's path and the paths its peer left (`migration.rs`).
    migrations: migration::Migrations,
    /// Paths quiche can no longer build a packet for, sent around (`unsendable.rs`).
    unsendable: unsendable::UnsendablePaths,
    /// The sequence number of the peer's connection ID this side sends to (`cids.rs`).
    dcid_in_use: u64,
    /// Stream data or a datagram arrived since [`QuicConnection::take_heard_data`] last
    /// looked (acknowledgements and PINGs do not count).
    heard_data: bool,
}

/// One stream's bookkeeping.
#[derive(Default)]
struct StreamEntry {
    reader: WaiterSlot,
    writer: WaiterSlot,
    /// In `credit_waiters`.
    awaiting_credit: bool,
    /// In `stop_watchers`.
    watching_stop: bool,
    /// The peer's STOP_SENDING code, once seen (quiche may collect the stream after).
    stopped: Option<u64>,
    /// Live handles (a bidi stream has two); the entry goes with the last.
    handles: u8,
    /// Its receive half was dropped before the end: what arrives is discarded until the
    /// peer's FIN or reset, and the entry stays until then.
    discarding: bool,
    /// Given the least urgent place after a loss (see `parking.rs`) until its next write.
    parked: bool,
}

/// Which peer-initiated streams of one kind were surfaced already. Ids below `next` were
/// surfaced unless they are in `skipped` (a later stream's data arrived first). The gap set
/// is bounded by the peer's stream limit, which quiche enforces.
#[derive(Default)]
struct PeerStreams {
    next: u64,
    skipped: BTreeSet<u64>,
}

/// What to wake once the lock is released.
#[derive(Default)]
struct Wakes {
    streams: Vec<Waker>,
    accept_uni: bool,
    accept_bidi: bool,
    credit: bool,
    datagrams: bool,
    closed: bool,
    established: bool,
}

/// The UDP payload every QUIC path carries (RFC 9000 §14): where PMTU discovery starts.
const MIN_DATAGRAM: usize = 1200;

/// The largest chunk one stream read hands out.
const READ_CHUNK: usize = 16 * 1024;

/// What one read tries first, on the stack: a chat message fits many times over.
const SMALL_READ: usize = 2048;

/// Received datagrams kept for the session before the oldest are dropped (they are
/// unreliable by definition; nothing may grow without bound on a peer's say-so).
const MAX_QUEUED_DATAGRAMS: usize = 256;

impl Shared {
    /// Wakes the endpoint, unless it was woken since its last `send`.
    fn request_flush(&self) {
        if self.flush_pending.swap(true, Ordering::AcqRel) {
            return;
        }
        let waker = self.flush_waker.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(waker) = waker.as_ref() {
            waker.wake_by_ref();
        }
    }
}

impl Wakes {
    fn deliver(self, shared: &Shared) {
        for waker in self.streams {
            waker.wake();
        }
        for (flag, list) in [
            (self.accept_uni, &shared.accept_uni),
            (self.accept_bidi, &shared.accept_bidi),
            (self.credit, &shared.credit),
            (self.datagrams, &shared.datagrams),
            (self.closed, &shared.closed),
            (self.established || self.closed, &shared.established),
        ] {
            if flag {
                list.wake_all();
            }
        }
        if self.closed {
            shared.request_flush();
        }
    }
}

impl PeerStreams {
    /// Whether peer stream `id` (of this kind) is seen for the first time.
    fn first_sight(&mut self, id: u64) -> bool {
        if id >= self.next {
            self.skipped.extend((self.next..id).step_by(4));
            self.next = id + 4;
            return true;
        }
        self.skipped.remove(&id)
    }
}

impl std::fmt::Debug for QuicConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicConnection").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for QuicSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicSession")
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for QuicSendStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicSendStream")
            .field("id", &self.id)
            .finish()
    }
}

impl std::fmt::Debug for QuicRecvStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicRecvStream")
            .field("id", &self.id)
            .finish()
    }
}
