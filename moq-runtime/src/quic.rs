//! The quiche adapter for raw QUIC: `moq_net::transport` over a `quiche::Connection`.
//!
//! A [`QuicConnection`] wraps one quiche connection behind a lock, shared by the endpoint
//! that moves its packets ([`recv`](QuicConnection::recv), [`send`](QuicConnection::send),
//! [`on_timeout`](QuicConnection::on_timeout)) and by the [`QuicSession`] and stream
//! handles a session machine uses. The lock is a plain mutex: DESIGN.md measured a mutex
//! around the connection at 1–3.5 % over passing it as context, and far cheaper than a
//! channel to the driver.
//!
//! After the endpoint feeds packets in, [`QuicConnection::recv`] surfaces new streams and
//! wakes whoever waits on a stream, an accept queue, stream credit, datagrams or the close;
//! after a session writes, the endpoint's flush waiter is woken so that it calls `send`.
//! Wakers always run after the lock is released.
//!
//! Create the [`QuicSession`] once the handshake is done (the negotiated protocol is read
//! then).

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::{Buf, Bytes};
use kio::sync::Mutex;
use kio::{Waiter, WaiterList};
use moq_net::transport::{
    RecvStream, SendStream, Session, StreamError, TransportError, TransportStats,
};

/// One quiche connection, shared by its endpoint and its session.
#[derive(Clone)]
pub struct QuicConnection {
    shared: Arc<Shared>,
}

/// The session side of a [`QuicConnection`]: implements `moq_net::transport::Session`.
/// Clones are handles to the same connection.
#[derive(Clone)]
pub struct QuicSession {
    connection: QuicConnection,
    protocol: Option<String>,
}

/// The sending half of a QUIC stream.
pub struct QuicSendStream {
    connection: QuicConnection,
    id: u64,
}

/// The receiving half of a QUIC stream.
pub struct QuicRecvStream {
    connection: QuicConnection,
    id: u64,
    finished: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Woken when there may be packets to send.
    flush: WaiterList,
    accept_uni: WaiterList,
    accept_bidi: WaiterList,
    credit: WaiterList,
    datagrams: WaiterList,
    closed: WaiterList,
}

struct State {
    conn: quiche::Connection,
    server: bool,
    streams: HashMap<u64, StreamWaiters>,
    /// Peer-initiated streams already handed to the session.
    surfaced: HashSet<u64>,
    incoming_uni: VecDeque<u64>,
    incoming_bidi: VecDeque<u64>,
    next_uni: u64,
    next_bidi: u64,
    received_datagrams: VecDeque<Bytes>,
    /// A FIN was queued with no bytes of its own and may not be in a packet yet; see
    /// [`State::emit_before_acks`].
    lone_fin: bool,
    /// Packets emitted ahead of the endpoint's next transmit pass; sent before any others.
    outbox: VecDeque<(Vec<u8>, quiche::SendInfo)>,
}

#[derive(Clone, Default)]
struct StreamWaiters {
    read: Arc<WaiterList>,
    write: Arc<WaiterList>,
}

/// What to wake once the lock is released.
#[derive(Default)]
struct Wakes {
    streams: Vec<Arc<WaiterList>>,
    accept_uni: bool,
    accept_bidi: bool,
    credit: bool,
    datagrams: bool,
    closed: bool,
    flush: bool,
}

/// The largest chunk one stream read hands out.
const READ_CHUNK: usize = 16 * 1024;

impl QuicConnection {
    /// Wraps a quiche connection (from `quiche::connect` or `quiche::accept`).
    pub fn new(conn: quiche::Connection) -> Self {
        let server = conn.is_server();
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    conn,
                    server,
                    streams: HashMap::new(),
                    surfaced: HashSet::new(),
                    incoming_uni: VecDeque::new(),
                    incoming_bidi: VecDeque::new(),
                    // Stream ids: bit 0 is the initiator (1 = server), bit 1 uni.
                    next_uni: 2 | u64::from(server),
                    next_bidi: u64::from(server),
                    received_datagrams: VecDeque::new(),
                    lone_fin: false,
                    outbox: VecDeque::new(),
                }),
                flush: WaiterList::new(),
                accept_uni: WaiterList::new(),
                accept_bidi: WaiterList::new(),
                credit: WaiterList::new(),
                datagrams: WaiterList::new(),
                closed: WaiterList::new(),
            }),
        }
    }

    /// Feeds one received datagram to the connection, then wakes whoever it concerns.
    pub fn recv(
        &self,
        datagram: &mut [u8],
        from: SocketAddr,
        to: SocketAddr,
    ) -> Result<usize, quiche::Error> {
        let mut state = self.shared.state.lock();
        if state.lone_fin {
            state.emit_before_acks();
        }
        let result = state.conn.recv(datagram, quiche::RecvInfo { from, to });
        let wakes = state.process();
        drop(state);
        self.wake(wakes);
        result
    }

    /// The next packet to send, if any: its length in `out` and where it goes.
    pub fn send(&self, out: &mut [u8]) -> Result<Option<(usize, quiche::SendInfo)>, quiche::Error> {
        let mut state = self.shared.state.lock();
        if let Some((packet, info)) = state.outbox.pop_front() {
            let Some(slot) = out.get_mut(..packet.len()) else {
                return Err(quiche::Error::BufferTooShort);
            };
            slot.copy_from_slice(&packet);
            return Ok(Some((packet.len(), info)));
        }
        let result = match state.conn.send(out) {
            Ok(sent) => Ok(Some(sent)),
            Err(quiche::Error::Done) => {
                // Everything that could go out went out, a lone FIN included.
                state.lone_fin = false;
                Ok(None)
            }
            Err(error) => Err(error),
        };
        // Sending may close the connection (an idle timeout noticed, a close flushed).
        let wakes = state.process();
        drop(state);
        self.wake(wakes);
        result
    }

    /// How long until [`on_timeout`](Self::on_timeout) is due, if a timer is set.
    pub fn timeout(&self) -> Option<Duration> {
        self.shared.state.lock().conn.timeout()
    }

    /// Runs the connection's timers (loss recovery, idle timeout).
    pub fn on_timeout(&self) {
        let mut state = self.shared.state.lock();
        state.conn.on_timeout();
        let wakes = state.process();
        drop(state);
        self.wake(wakes);
    }

    /// Whether the handshake completed.
    pub fn is_established(&self) -> bool {
        self.shared.state.lock().conn.is_established()
    }

    /// Whether the connection is closed for good.
    pub fn is_closed(&self) -> bool {
        self.shared.state.lock().conn.is_closed()
    }

    /// The ALPN the handshake selected (empty before it completes).
    pub fn application_protocol(&self) -> Option<Vec<u8>> {
        let state = self.shared.state.lock();
        let protocol = state.conn.application_proto();
        (!protocol.is_empty()).then(|| protocol.to_vec())
    }

    /// The peer's leaf certificate (DER), once the handshake received it.
    pub fn peer_certificate(&self) -> Option<Vec<u8>> {
        self.shared
            .state
            .lock()
            .conn
            .peer_cert()
            .map(<[u8]>::to_vec)
    }

    /// The peer's address on the connection's active path.
    pub fn peer_address(&self) -> Option<SocketAddr> {
        let state = self.shared.state.lock();
        state.conn.path_stats().next().map(|path| path.peer_addr)
    }

    /// Closes the connection with an application `code` and `reason`.
    pub fn close(&self, code: u64, reason: &str) {
        self.with(|state| {
            let _ = state.conn.close(true, code, reason.as_bytes());
        });
    }

    /// Why the connection closed, in words (empty while it is open).
    pub fn close_reason(&self) -> String {
        match self.shared.state.lock().closed() {
            Some(error) => error.to_string(),
            None => String::new(),
        }
    }

    /// Registers `waiter` to be woken when a session writes something (or closes): the
    /// endpoint should then call [`send`](Self::send) until it returns `None`.
    pub fn register_flush(&self, waiter: &Waiter) {
        self.shared.flush.register(waiter);
    }

    /// The session side, for `moq_net::session::connect` / `accept`. Call it once the
    /// handshake is done.
    pub fn session(&self) -> QuicSession {
        let protocol = {
            let state = self.shared.state.lock();
            std::str::from_utf8(state.conn.application_proto())
                .ok()
                .filter(|protocol| !protocol.is_empty())
                .map(str::to_owned)
        };
        QuicSession {
            connection: self.clone(),
            protocol,
        }
    }

    fn wake(&self, wakes: Wakes) {
        for list in wakes.streams {
            list.wake_all();
        }
        let shared = &self.shared;
        for (flag, list) in [
            (wakes.accept_uni, &shared.accept_uni),
            (wakes.accept_bidi, &shared.accept_bidi),
            (wakes.credit, &shared.credit),
            (wakes.datagrams, &shared.datagrams),
            (wakes.closed, &shared.closed),
            (wakes.flush, &shared.flush),
        ] {
            if flag {
                list.wake_all();
            }
        }
    }

    /// Runs `f` on the state, then flushes: whatever a session does may produce packets.
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut state = self.shared.state.lock();
        let result = f(&mut state);
        drop(state);
        self.shared.flush.wake_all();
        result
    }
}

impl State {
    /// After the connection changed: new streams, readable and writable streams, credit,
    /// datagrams, the close.
    fn process(&mut self) -> Wakes {
        let mut wakes = Wakes::default();
        let readable: Vec<u64> = self.conn.readable().collect();
        for id in readable {
            let peer_initiated = (id & 1 == 1) != self.server;
            if peer_initiated && self.surfaced.insert(id) {
                if id & 2 == 0 {
                    self.incoming_bidi.push_back(id);
                    wakes.accept_bidi = true;
                } else {
                    self.incoming_uni.push_back(id);
                    wakes.accept_uni = true;
                }
                self.streams.entry(id).or_default();
            }
            if let Some(waiters) = self.streams.get(&id) {
                wakes.streams.push(waiters.read.clone());
            }
        }
        let writable: Vec<u64> = self.conn.writable().collect();
        for id in writable {
            if let Some(waiters) = self.streams.get(&id) {
                wakes.streams.push(waiters.write.clone());
            }
        }
        wakes.credit =
            self.conn.peer_streams_left_bidi() > 0 || self.conn.peer_streams_left_uni() > 0;
        // Sized to each queued datagram: no buffer to zero on the (many) calls with none.
        while let Some(len) = self.conn.dgram_recv_front_len() {
            let mut datagram = vec![0u8; len];
            match self.conn.dgram_recv(&mut datagram) {
                Ok(read) => {
                    datagram.truncate(read);
                    self.received_datagrams.push_back(Bytes::from(datagram));
                    wakes.datagrams = true;
                }
                Err(_) => break,
            }
        }
        if self.conn.is_closed() || self.conn.is_draining() {
            wakes.closed = true;
            wakes.accept_uni = true;
            wakes.accept_bidi = true;
            wakes.credit = true;
            wakes.datagrams = true;
            wakes.flush = true;
            wakes.streams.extend(
                self.streams
                    .values()
                    .flat_map(|w| [w.read.clone(), w.write.clone()]),
            );
        }
        wakes
    }

    /// Why the connection is gone, if it is.
    fn closed(&self) -> Option<TransportError> {
        if !(self.conn.is_closed() || self.conn.is_draining()) {
            return None;
        }
        if let Some(error) = self.conn.peer_error() {
            return Some(TransportError::Closed {
                code: error.error_code,
                reason: String::from_utf8_lossy(&error.reason).into_owned(),
                remote: true,
            });
        }
        if let Some(error) = self.conn.local_error() {
            return Some(TransportError::Closed {
                code: error.error_code,
                reason: String::from_utf8_lossy(&error.reason).into_owned(),
                remote: false,
            });
        }
        if self.conn.is_timed_out() {
            return Some(TransportError::Lost("idle timeout".into()));
        }
        Some(TransportError::Lost("connection closed".into()))
    }

    /// Puts whatever is queued (a lone FIN in particular) into packets now, before the
    /// next received datagram's ACKs are processed. The packets wait in the outbox for the
    /// endpoint's next transmit pass, which the receive schedules anyway.
    ///
    /// Why: quiche (up to at least 0.30, cloudflare/quiche#2525) counts a stream's sending
    /// side complete once its *bytes* are acknowledged, ignoring whether the FIN was. A
    /// FIN written with no bytes after all the bytes were sent is then lost if an ACK for
    /// those bytes arrives before the FIN is in a packet: the stream is collected with the
    /// FIN still queued, and the peer waits for the end of the stream forever. Writing the
    /// FIN with the last bytes (`poll_write_final`) avoids a lone FIN where the end is
    /// known in time; this closes the window for the rest. What it cannot close: a packet
    /// carrying a lone FIN that is lost after the bytes' ACK (quiche no longer has the
    /// stream to retransmit it from), or a congestion window too full to emit it.
    fn emit_before_acks(&mut self) {
        self.lone_fin = false;
        let size = self.conn.max_send_udp_payload_size();
        loop {
            let mut packet = vec![0; size];
            match self.conn.send(&mut packet) {
                Ok((len, info)) => {
                    packet.truncate(len);
                    self.outbox.push_back((packet, info));
                }
                Err(_) => break,
            }
        }
    }

    fn open(&mut self, bidi: bool) -> u64 {
        let counter = if bidi {
            &mut self.next_bidi
        } else {
            &mut self.next_uni
        };
        let id = *counter;
        *counter += 4;
        self.streams.entry(id).or_default();
        id
    }
}

impl QuicSession {
    fn stream_pair(&self, id: u64) -> (QuicSendStream, QuicRecvStream) {
        (
            QuicSendStream {
                connection: self.connection.clone(),
                id,
            },
            QuicRecvStream {
                connection: self.connection.clone(),
                id,
                finished: false,
            },
        )
    }
}

impl Session for QuicSession {
    type SendStream = QuicSendStream;
    type RecvStream = QuicRecvStream;

    fn poll_open_uni(&mut self, waiter: &Waiter) -> Poll<Result<QuicSendStream, TransportError>> {
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        if let Some(error) = state.closed() {
            return Poll::Ready(Err(error));
        }
        if state.conn.peer_streams_left_uni() == 0 {
            shared.credit.register(waiter);
            return Poll::Pending;
        }
        let id = state.open(false);
        drop(state);
        Poll::Ready(Ok(self.stream_pair(id).0))
    }

    fn poll_open_bidi(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<(QuicSendStream, QuicRecvStream), TransportError>> {
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        if let Some(error) = state.closed() {
            return Poll::Ready(Err(error));
        }
        if state.conn.peer_streams_left_bidi() == 0 {
            shared.credit.register(waiter);
            return Poll::Pending;
        }
        let id = state.open(true);
        drop(state);
        Poll::Ready(Ok(self.stream_pair(id)))
    }

    fn poll_accept_uni(&mut self, waiter: &Waiter) -> Poll<Result<QuicRecvStream, TransportError>> {
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        if let Some(id) = state.incoming_uni.pop_front() {
            drop(state);
            return Poll::Ready(Ok(self.stream_pair(id).1));
        }
        if let Some(error) = state.closed() {
            return Poll::Ready(Err(error));
        }
        shared.accept_uni.register(waiter);
        Poll::Pending
    }

    fn poll_accept_bidi(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<(QuicSendStream, QuicRecvStream), TransportError>> {
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        if let Some(id) = state.incoming_bidi.pop_front() {
            drop(state);
            return Poll::Ready(Ok(self.stream_pair(id)));
        }
        if let Some(error) = state.closed() {
            return Poll::Ready(Err(error));
        }
        shared.accept_bidi.register(waiter);
        Poll::Pending
    }

    fn send_datagram(&mut self, payload: Bytes) -> Result<(), TransportError> {
        self.connection.with(|state| {
            if let Some(error) = state.closed() {
                return Err(error);
            }
            // Unreliable by definition: one that does not fit is dropped.
            let _ = state.conn.dgram_send(&payload);
            Ok(())
        })
    }

    fn poll_recv_datagram(&mut self, waiter: &Waiter) -> Poll<Result<Bytes, TransportError>> {
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        if let Some(datagram) = state.received_datagrams.pop_front() {
            return Poll::Ready(Ok(datagram));
        }
        if let Some(error) = state.closed() {
            return Poll::Ready(Err(error));
        }
        shared.datagrams.register(waiter);
        Poll::Pending
    }

    fn max_datagram_size(&self) -> Option<usize> {
        self.connection
            .shared
            .state
            .lock()
            .conn
            .dgram_max_writable_len()
    }

    fn close(&mut self, code: u64, reason: &str) {
        self.connection.with(|state| {
            let _ = state.conn.close(true, code, reason.as_bytes());
        });
    }

    fn poll_closed(&mut self, waiter: &Waiter) -> Poll<TransportError> {
        let shared = &self.connection.shared;
        let state = shared.state.lock();
        if let Some(error) = state.closed() {
            return Poll::Ready(error);
        }
        shared.closed.register(waiter);
        Poll::Pending
    }

    fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    fn stats(&self) -> TransportStats {
        let state = self.connection.shared.state.lock();
        let stats = state.conn.stats();
        let path = state.conn.path_stats().next();
        TransportStats {
            rtt: path.as_ref().map(|p| p.rtt),
            bytes_sent: stats.sent_bytes,
            bytes_received: stats.recv_bytes,
            packets_lost: stats.lost as u64,
            estimated_bitrate: path.and_then(|p| p.delivery_rate.checked_mul(8)),
        }
    }
}

impl QuicSendStream {
    /// The QUIC stream id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Writes what fits of `data` now (and the FIN once all of it is written, if `fin`),
    /// without waiting: for best-effort writes on the way out, such as a closing capsule.
    pub(crate) fn try_write(&mut self, data: &mut Bytes, fin: bool) {
        self.connection.with(|state| {
            if let Ok(written) = state.conn.stream_send(self.id, data, fin) {
                data.advance(written);
            }
        });
    }
}

impl QuicSendStream {
    /// Writes what fits of `data`, with the FIN behind its last byte if `fin`; `Pending`
    /// (with `waiter` registered) while flow control holds the rest back. quiche queues
    /// the FIN only with the write that takes the last byte, so a partial write leaves it
    /// for a later call.
    fn poll_send(
        &mut self,
        waiter: &Waiter,
        data: &mut Bytes,
        fin: bool,
    ) -> Poll<Result<(), StreamError>> {
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        if let Some(error) = state.closed() {
            return Poll::Ready(Err(error.into()));
        }
        let mut wrote = false;
        let result = loop {
            if data.is_empty() {
                break Poll::Ready(Ok(()));
            }
            match state.conn.stream_send(self.id, data, fin) {
                Ok(written) if written > 0 => {
                    data.advance(written);
                    wrote = true;
                }
                Ok(_) | Err(quiche::Error::Done) => {
                    let waiters = state.streams.entry(self.id).or_default().write.clone();
                    waiters.register(waiter);
                    break Poll::Pending;
                }
                Err(quiche::Error::StreamStopped(code)) => {
                    break Poll::Ready(Err(StreamError::Stopped(code)));
                }
                Err(error) => {
                    break Poll::Ready(Err(
                        TransportError::Lost(format!("stream write: {error}")).into()
                    ));
                }
            }
        };
        drop(state);
        if wrote {
            shared.flush.wake_all();
        }
        result
    }
}

impl SendStream for QuicSendStream {
    fn poll_write(&mut self, waiter: &Waiter, data: &mut Bytes) -> Poll<Result<(), StreamError>> {
        self.poll_send(waiter, data, false)
    }

    fn poll_write_final(
        &mut self,
        waiter: &Waiter,
        data: &mut Bytes,
    ) -> Poll<Result<(), StreamError>> {
        if data.is_empty() {
            return Poll::Ready(self.finish());
        }
        self.poll_send(waiter, data, true)
    }

    fn finish(&mut self) -> Result<(), StreamError> {
        let id = self.id;
        self.connection
            .with(|state| match state.conn.stream_send(id, &[], true) {
                Ok(_) => {
                    state.lone_fin = true;
                    Ok(())
                }
                Err(quiche::Error::Done) => Ok(()),
                Err(quiche::Error::StreamStopped(code)) => Err(StreamError::Stopped(code)),
                Err(error) => Err(TransportError::Lost(format!("stream finish: {error}")).into()),
            })
    }

    fn reset(&mut self, code: u64) {
        let id = self.id;
        self.connection.with(|state| {
            let _ = state
                .conn
                .stream_shutdown(id, quiche::Shutdown::Write, code);
        });
    }

    fn set_priority(&mut self, priority: i32) {
        // quiche has eight urgency levels (0 most urgent): the subscriber priority's top
        // three bits pick one. Streams of one level share bandwidth (incremental).
        let subscriber = (priority >> 23).clamp(0, 255) as u8;
        let urgency = 7 - (subscriber >> 5);
        let id = self.id;
        self.connection.with(|state| {
            let _ = state.conn.stream_priority(id, urgency, true);
        });
    }

    fn poll_stopped(&mut self, waiter: &Waiter) -> Poll<Result<u64, StreamError>> {
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        if let Some(error) = state.closed() {
            return Poll::Ready(Err(error.into()));
        }
        match state.conn.stream_writable(self.id, 0) {
            Err(quiche::Error::StreamStopped(code)) => Poll::Ready(Ok(code)),
            _ => {
                let waiters = state.streams.entry(self.id).or_default().write.clone();
                waiters.register(waiter);
                Poll::Pending
            }
        }
    }
}

impl QuicRecvStream {
    /// The QUIC stream id.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl RecvStream for QuicRecvStream {
    fn poll_read(&mut self, waiter: &Waiter) -> Poll<Result<Option<Bytes>, StreamError>> {
        if self.finished {
            return Poll::Ready(Ok(None));
        }
        let shared = &self.connection.shared;
        let mut state = shared.state.lock();
        let mut buf = [0u8; READ_CHUNK];
        match state.conn.stream_recv(self.id, &mut buf) {
            Ok((len, fin)) => {
                self.finished = fin;
                drop(state);
                // Reading frees flow-control credit: the peer may be told.
                shared.flush.wake_all();
                if len == 0 && fin {
                    return Poll::Ready(Ok(None));
                }
                Poll::Ready(Ok(Some(Bytes::copy_from_slice(&buf[..len]))))
            }
            Err(quiche::Error::Done) => {
                if let Some(error) = state.closed() {
                    return Poll::Ready(Err(error.into()));
                }
                let waiters = state.streams.entry(self.id).or_default().read.clone();
                waiters.register(waiter);
                Poll::Pending
            }
            Err(quiche::Error::StreamReset(code)) => Poll::Ready(Err(StreamError::Reset(code))),
            // Finished and collected already.
            Err(quiche::Error::InvalidStreamState(_)) => Poll::Ready(Ok(None)),
            Err(error) => Poll::Ready(Err(
                TransportError::Lost(format!("stream read: {error}")).into()
            )),
        }
    }

    fn stop(&mut self, code: u64) {
        let id = self.id;
        self.connection.with(|state| {
            let _ = state.conn.stream_shutdown(id, quiche::Shutdown::Read, code);
        });
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
