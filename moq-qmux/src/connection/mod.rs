//! One QMux connection as a state machine without I/O: records in
//! ([`handle_record`](Connection::handle_record)), records out
//! ([`poll_transmit`](Connection::poll_transmit)), a timer
//! ([`timeout`](Connection::timeout), [`on_timeout`](Connection::on_timeout)), and the
//! stream operations a session's handles call.
//!
//! It holds no lock and calls no waker: each operation that should wake a task (a reader
//! whose data came, the driver when there is something to send) pushes the waker onto a
//! list the caller takes with [`take_wakers`](Connection::take_wakers) and calls once its
//! own lock is released ([`crate::session`] does this).
//!
//! # How it departs from the draft, and why
//!
//! - The idle timer restarts on each record *received* only, not on each one sent
//!   (spec: -02 §7.1 says both). A keep-alive QX_PING goes after a quiet interval, and the
//!   peer's answer restarts the timer; restarting it on our own sends would keep a dead
//!   peer's connection forever, since TCP takes small writes long after the peer is gone.
//!   That is the whole point of the keep-alive: a crashed client must not stay announced.
//! - It offers neither DATAGRAM nor RESET_STREAM_AT: moq-lite sends no datagrams over QMux
//!   (spec: draft-lcurley-moq-lite §Transports) and resets streams outright.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::task::Waker;
use std::time::Duration;

use bytes::Bytes;
use moqx_kio::WaiterList;
use moqx_net::runtime::Instant;
use moqx_net::transport::{TransportError, TransportStats};

use crate::frame::Frame;
use crate::params::TransportParameters;
use crate::version::Version;

mod api;
mod receive;
mod stream;
mod transmit;

#[cfg(test)]
mod tests;

use stream::{SendKey, Stream, StreamKind};

/// Which end of the connection this is: it decides which stream IDs are whose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The end that opened the carrier.
    Client,
    /// The end that accepted it.
    Server,
}

/// What a connection allows its peer and holds for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// A peer silent this long is given up (0: never): the `max_idle_timeout` sent.
    pub idle_timeout: Duration,
    /// How long without a word from the peer before a QX_PING asks for one (`None`: never;
    /// draft-00 has no QX_PING).
    pub keep_alive: Option<Duration>,
    /// Streams of each direction the peer may have open at once.
    pub max_streams: u64,
    /// Bytes the peer may send on one stream before the application reads them.
    pub stream_window: u64,
    /// Bytes the peer may send on all streams together before the application reads them.
    pub connection_window: u64,
    /// The largest record taken from the peer (at least 16,382).
    pub max_record_size: u64,
    /// The most bytes written by the application and not yet framed, all streams
    /// together; a writer waits beyond it.
    pub send_buffer: usize,
}

impl Default for Config {
    /// 30 s idle timeout with a keep-alive every 5 s, 1,000 streams each way, 1 MiB per
    /// stream and 16 MiB per connection, 64 KiB records, 1 MiB queued to send.
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(30),
            keep_alive: Some(Duration::from_secs(5)),
            max_streams: 1_000,
            stream_window: 1 << 20,
            connection_window: 16 << 20,
            max_record_size: 64 * 1024,
            send_buffer: 1 << 20,
        }
    }
}

/// A QUIC transport error code (RFC 9000 §20.1) that closes the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    FlowControl = 0x3,
    StreamLimit = 0x4,
    StreamState = 0x5,
    FinalSize = 0x6,
    FrameEncoding = 0x7,
    TransportParameter = 0x8,
    ProtocolViolation = 0xa,
}

impl Code {
    fn name(self) -> &'static str {
        match self {
            Self::FlowControl => "FLOW_CONTROL_ERROR",
            Self::StreamLimit => "STREAM_LIMIT_ERROR",
            Self::StreamState => "STREAM_STATE_ERROR",
            Self::FinalSize => "FINAL_SIZE_ERROR",
            Self::FrameEncoding => "FRAME_ENCODING_ERROR",
            Self::TransportParameter => "TRANSPORT_PARAMETER_ERROR",
            Self::ProtocolViolation => "PROTOCOL_VIOLATION",
        }
    }
}

/// A peer's breach of the protocol: the code and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    pub(crate) code: Code,
    pub(crate) reason: String,
}

pub(crate) fn violation(code: Code, reason: impl Into<String>) -> Violation {
    Violation {
        code,
        reason: reason.into(),
    }
}

/// Stream counts of one direction.
#[derive(Debug, Default)]
struct Counts {
    /// Streams this side opened.
    opened: u64,
    /// The peer's limit on them (MAX_STREAMS).
    peer_max: u64,
    /// The limit a STREAMS_BLOCKED was sent at.
    blocked_at: Option<u64>,
    /// Streams the peer opened (the highest index seen, plus one).
    peer_opened: u64,
    /// Of those, the ones finished and forgotten.
    peer_finished: u64,
    /// The limit given to the peer.
    max: u64,
}

/// One QMux connection. See the module documentation.
#[derive(Debug)]
pub struct Connection {
    side: Side,
    version: Version,
    config: Config,
    /// The peer's parameters, once its first frame arrived.
    peer: Option<TransportParameters>,
    /// Why it is gone, once it is.
    closed: Option<TransportError>,
    streams: HashMap<u64, Stream>,
    bidi: Counts,
    uni: Counts,
    /// Streams the peer opened, not yet accepted.
    incoming_bidi: VecDeque<u64>,
    incoming_uni: VecDeque<u64>,
    /// The transport parameters, until they went: always the first frame.
    parameters: Option<Frame>,
    /// Frames to send ahead of stream data: credit, resets, pings.
    control: VecDeque<Frame>,
    /// A CONNECTION_CLOSE to send as the last frame.
    close_frame: Option<Frame>,
    /// Streams with something to send, in the order they go.
    sendable: BTreeSet<SendKey>,
    /// Streams with bytes held by the connection's limit until MAX_DATA raises it.
    connection_blocked: Vec<u64>,
    /// Streams whose writer waits for room.
    waiting_writers: Vec<u64>,
    next_turn: u64,
    /// Bytes queued on every stream together.
    buffered: usize,
    /// Stream bytes framed so far, and the peer's limit on them (MAX_DATA).
    sent_data: u64,
    send_max_data: u64,
    data_blocked_at: Option<u64>,
    /// Stream bytes received, read (or discarded) by this side, and the limit given.
    received_data: u64,
    consumed_data: u64,
    max_data: u64,
    /// When the peer was last heard from, and when this side last asked it for a word.
    last_heard: Instant,
    last_ping: Option<Instant>,
    /// The newest QX_PING sent and when; the newest the peer sent; an answer owed.
    ping_sent: Option<(u64, Instant)>,
    pings_sent: u64,
    peer_ping: Option<u64>,
    pong_owed: Option<u64>,
    rtt: Option<Duration>,
    bytes_sent: u64,
    bytes_received: u64,
    /// Tasks waiting to open a stream (for the peer's MAX_STREAMS), to accept one, or for
    /// the end.
    openers: WaiterList,
    acceptors: WaiterList,
    closers: WaiterList,
    /// The driver's waker, called when there is something to send, once per
    /// [`poll_transmit`](Self::poll_transmit).
    driver: Option<Waker>,
    driver_woken: bool,
    wakers: Vec<Waker>,
}

impl Connection {
    /// A connection of `side` speaking `version`, its transport parameters queued as its
    /// first frame. `applications` are the application protocols to negotiate in the
    /// parameters (for a carrier that negotiated none: plain TCP), empty otherwise.
    pub fn new(
        side: Side,
        version: Version,
        config: Config,
        applications: Vec<String>,
        now: Instant,
    ) -> Self {
        let parameters = TransportParameters {
            max_idle_timeout_ms: config.idle_timeout.as_millis().min(u128::from(u32::MAX)) as u64,
            initial_max_data: config.connection_window,
            initial_max_stream_data_bidi_local: config.stream_window,
            initial_max_stream_data_bidi_remote: config.stream_window,
            initial_max_stream_data_uni: config.stream_window,
            initial_max_streams_bidi: config.max_streams,
            initial_max_streams_uni: config.max_streams,
            max_record_size: config
                .max_record_size
                .max(crate::params::DEFAULT_MAX_RECORD_SIZE),
            application_protocols: applications,
        };
        let first = Frame::TransportParameters(parameters.encode(version.has_records()));
        let counts = || Counts {
            max: config.max_streams,
            ..Counts::default()
        };
        Self {
            side,
            version,
            peer: None,
            closed: None,
            streams: HashMap::new(),
            bidi: counts(),
            uni: counts(),
            incoming_bidi: VecDeque::new(),
            incoming_uni: VecDeque::new(),
            parameters: Some(first),
            control: VecDeque::new(),
            close_frame: None,
            sendable: BTreeSet::new(),
            connection_blocked: Vec::new(),
            waiting_writers: Vec::new(),
            next_turn: 0,
            buffered: 0,
            sent_data: 0,
            send_max_data: 0,
            data_blocked_at: None,
            received_data: 0,
            consumed_data: 0,
            max_data: config.connection_window,
            last_heard: now,
            last_ping: None,
            ping_sent: None,
            pings_sent: 0,
            peer_ping: None,
            pong_owed: None,
            rtt: None,
            bytes_sent: 0,
            bytes_received: 0,
            openers: WaiterList::new(),
            acceptors: WaiterList::new(),
            closers: WaiterList::new(),
            driver: None,
            driver_woken: false,
            wakers: Vec::new(),
            config,
        }
    }

    /// The draft it speaks.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The peer's transport parameters, once they arrived: until then no stream can be
    /// opened (there is no credit).
    pub fn peer_parameters(&self) -> Option<&TransportParameters> {
        self.peer.as_ref()
    }

    /// Why the connection is gone, once it is.
    pub fn closed(&self) -> Option<&TransportError> {
        self.closed.as_ref()
    }

    /// The wakers its last operations owe, to call once the caller's lock is released.
    pub fn take_wakers(&mut self) -> Vec<Waker> {
        std::mem::take(&mut self.wakers)
    }

    /// Sets the driver's waker: it is called whenever the connection has something new to
    /// send or its timer moved, until the next [`poll_transmit`](Self::poll_transmit).
    pub fn set_driver_waker(&mut self, waker: &Waker) {
        if !self
            .driver
            .as_ref()
            .is_some_and(|known| known.will_wake(waker))
        {
            self.driver = Some(waker.clone());
        }
        self.driver_woken = false;
    }

    /// When [`on_timeout`](Self::on_timeout) is due: the idle timeout, or the next
    /// keep-alive.
    pub fn timeout(&self) -> Option<Instant> {
        if self.closed.is_some() {
            return None;
        }
        let idle = self.idle_timeout().map(|idle| self.last_heard + idle);
        let ping = self.ping_interval().map(|interval| {
            let since = self
                .last_ping
                .map_or(self.last_heard, |ping| ping.max(self.last_heard));
            since + interval
        });
        match (idle, ping) {
            (Some(idle), Some(ping)) => Some(idle.min(ping)),
            (idle, ping) => idle.or(ping),
        }
    }

    /// Acts on the timer: gives a silent peer up, or asks it for a word.
    pub fn on_timeout(&mut self, now: Instant) {
        if self.closed.is_some() {
            return;
        }
        if let Some(idle) = self.idle_timeout()
            && now >= self.last_heard + idle
        {
            tracing::debug!(
                ?idle,
                "QMux peer silent past the idle timeout: giving it up"
            );
            // spec: -02 §7.2, no frame: the carrier is shut down.
            self.set_closed(TransportError::Lost(format!(
                "no word from the peer for {idle:?} (idle timeout)"
            )));
            return;
        }
        if let Some(interval) = self.ping_interval() {
            let since = self
                .last_ping
                .map_or(self.last_heard, |ping| ping.max(self.last_heard));
            if now >= since + interval {
                self.pings_sent += 1;
                self.ping_sent = Some((self.pings_sent, now));
                self.last_ping = Some(now);
                self.queue_control(Frame::PingRequest(self.pings_sent));
            }
        }
    }

    /// Notes that the peer was heard from below QMux (a WebSocket Pong): it restarts the
    /// idle timer like a record would.
    pub fn handle_activity(&mut self, now: Instant) {
        self.last_heard = self.last_heard.max(now);
    }

    /// Closes the connection with an application `code` and `reason`: a CONNECTION_CLOSE
    /// goes out as the last frame. Idempotent.
    pub fn close(&mut self, code: u64, reason: &str) {
        if self.closed.is_some() {
            return;
        }
        tracing::debug!(code, reason, "closing the QMux connection");
        self.close_frame = Some(Frame::ConnectionClose {
            application: true,
            code,
            frame_type: 0,
            reason: Bytes::copy_from_slice(reason.as_bytes()),
        });
        self.set_closed(TransportError::Closed {
            code,
            reason: reason.to_owned(),
            remote: false,
        });
    }

    /// The carrier ended (the peer's FIN, a reset, a failed write): the connection is gone
    /// with `reason` unless it already was.
    pub fn handle_carrier_closed(&mut self, reason: &str) {
        if self.closed.is_none() {
            tracing::debug!(reason, "the QMux carrier ended");
            self.set_closed(TransportError::Lost(reason.to_owned()));
        }
    }

    /// The carrier found the peer's framing broken (a record over the limit, a draft-00
    /// frame with no end, a WebSocket text message): the connection is closed with
    /// FRAME_ENCODING_ERROR, saying `reason`.
    pub fn handle_malformed(&mut self, reason: &str) {
        self.fail(violation(Code::FrameEncoding, reason), 0);
    }

    /// The connection's counters.
    pub fn stats(&self) -> TransportStats {
        TransportStats {
            rtt: self.rtt,
            bytes_sent: self.bytes_sent,
            bytes_received: self.bytes_received,
            ..TransportStats::default()
        }
    }

    /// Streams it keeps state for (open, or ended and not yet forgotten).
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    /// The idle timeout in force: the shorter of the two sides' (RFC 9000 §10.1), if
    /// either set one.
    fn idle_timeout(&self) -> Option<Duration> {
        let ours = Some(self.config.idle_timeout).filter(|idle| !idle.is_zero());
        let theirs = self
            .peer
            .as_ref()
            .map(|peer| Duration::from_millis(peer.max_idle_timeout_ms))
            .filter(|idle| !idle.is_zero());
        match (ours, theirs) {
            (Some(ours), Some(theirs)) => Some(ours.min(theirs)),
            (ours, theirs) => ours.or(theirs),
        }
    }

    /// How long a quiet peer waits for a QX_PING, if this side sends them.
    fn ping_interval(&self) -> Option<Duration> {
        self.config.keep_alive.filter(|_| self.version.has_ping())
    }

    /// Closes on the peer's breach: a CONNECTION_CLOSE with the transport code goes out.
    fn fail(&mut self, violation: Violation, frame_type: u64) {
        if self.closed.is_some() {
            return;
        }
        tracing::debug!(code = violation.code.name(), reason = %violation.reason, "QMux peer broke the protocol");
        self.close_frame = Some(Frame::ConnectionClose {
            application: false,
            code: violation.code as u64,
            frame_type,
            reason: Bytes::copy_from_slice(violation.reason.as_bytes()),
        });
        self.set_closed(TransportError::Lost(format!(
            "closed by this side: {}: {}",
            violation.code.name(),
            violation.reason
        )));
    }

    /// Marks the connection gone and wakes every task parked on it.
    fn set_closed(&mut self, error: TransportError) {
        self.closed = Some(error);
        self.control.clear();
        self.sendable.clear();
        self.connection_blocked.clear();
        self.buffered = 0;
        for stream in self.streams.values_mut() {
            if let Some(send) = &mut stream.send {
                self.wakers.extend(send.writer.take());
                self.wakers.extend(send.stop_watcher.take());
            }
            if let Some(recv) = &mut stream.recv {
                self.wakers.extend(recv.reader.take());
            }
        }
        for list in [&self.openers, &self.acceptors, &self.closers] {
            list.wake_all();
        }
        self.wake_driver();
    }

    fn queue_control(&mut self, frame: Frame) {
        self.control.push_back(frame);
        self.wake_driver();
    }

    fn wake_driver(&mut self) {
        if !self.driver_woken
            && let Some(driver) = &self.driver
        {
            self.driver_woken = true;
            self.wakers.push(driver.clone());
        }
    }

    /// The stream kind this side opens in `uni` direction.
    fn local_kind(&self, uni: bool) -> StreamKind {
        StreamKind {
            server: self.side == Side::Server,
            uni,
        }
    }

    fn counts(&mut self, uni: bool) -> &mut Counts {
        match uni {
            true => &mut self.uni,
            false => &mut self.bidi,
        }
    }

    /// Puts a stream with something to send at the back of its priority's turn.
    fn schedule(&mut self, id: u64) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        if stream.key.is_some() || !stream.send.as_ref().is_some_and(|send| send.has_output()) {
            return;
        }
        self.next_turn += 1;
        let key = SendKey {
            tier: u8::from(stream.priority.is_some()),
            priority: std::cmp::Reverse(stream.priority.unwrap_or_default()),
            turn: self.next_turn,
            id,
        };
        stream.key = Some(key);
        self.sendable.insert(key);
        self.wake_driver();
    }

    /// Forgets a stream that needs nothing more, giving a peer's stream's place back.
    fn forget_if_finished(&mut self, id: u64) {
        if !self.streams.get(&id).is_some_and(Stream::finished) {
            return;
        }
        if let Some(stream) = self.streams.remove(&id)
            && let Some(key) = stream.key
        {
            self.sendable.remove(&key);
        }
        let kind = StreamKind::of(id);
        if kind != self.local_kind(kind.uni) {
            self.peer_stream_finished(kind.uni);
        }
    }

    /// A stream the peer opened is gone: once half the window is used up, the peer gets
    /// as many more as finished (MAX_STREAMS).
    fn peer_stream_finished(&mut self, uni: bool) {
        let window = self.config.max_streams;
        let counts = self.counts(uni);
        counts.peer_finished += 1;
        let max = counts.peer_finished + window;
        if max - counts.max >= window.div_ceil(2).max(1) {
            counts.max = max;
            self.queue_control(Frame::MaxStreams { bidi: !uni, max });
        }
    }
}
