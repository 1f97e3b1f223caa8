//! The QUIC-like transport a session runs over, as poll-based traits.
//!
//! A driver implements these over a real connection (quiche, raw QUIC or WebTransport; the
//! browser's WebTransport), and the test runtime implements them in memory. They are
//! sans-IO in shape: every method takes `&mut self`, nothing blocks, and a `poll_*` method
//! that cannot make progress registers the caller's [`Waiter`] and returns `Pending`. There
//! is no `Send` bound anywhere: a session machine is `Send` exactly when its transport is.
//!
//! Streams are separate objects from the [`Session`] that opened or accepted them, so that a
//! session machine can hand each stream to the sub-machine that serves it.
//!
//! The call order, for every `poll_*`: call it when the waiter was woken (or first), act on
//! `Ready`, and on `Pending` do nothing until the waiter is woken again. A spurious wake is
//! harmless.

use std::task::Poll;

use bytes::Bytes;
use moqx_kio::Waiter;

/// How urgently a stream's data should go, relative to the other streams of its session:
/// a group stream's place in moq-lite's order (spec: moq-lite-05 §Priority). A higher
/// subscriber priority goes first; among equal subscriber priorities, a newer group goes
/// first. The derived order is exactly that: the greater value is the more urgent.
///
/// A transport maps it to what its QUIC stack can express (quiche's urgency levels, the
/// browser's `sendOrder`); a stream that never gets one (a control stream) keeps the
/// stack's default, which an adapter places ahead of every group stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamPriority {
    /// The subscriber's priority for the track (SUBSCRIBE's `Priority`; higher first).
    pub subscriber: u8,
    /// The group's sequence number (a newer group first).
    pub group: u64,
}

/// Why a connection is gone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// Closed with an application code: by the peer (`remote`) or by this side.
    #[error("connection closed by {} with code {code}: {reason}", if *.remote { "the peer" } else { "this side" })]
    Closed {
        /// The application close code (a moq-lite error code).
        code: u64,
        /// The reason phrase.
        reason: String,
        /// Whether the peer closed it.
        remote: bool,
    },
    /// The connection failed below the application: idle timeout, handshake failure, a
    /// transport error. The text says which.
    #[error("connection lost: {0}")]
    Lost(String),
}

/// Why a stream operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The peer reset the stream it was sending, with this code.
    #[error("stream reset by the peer with code {0}")]
    Reset(u64),
    /// The peer asked this side to stop sending (STOP_SENDING), with this code.
    #[error("the peer stopped the stream with code {0}")]
    Stopped(u64),
    /// The connection is gone.
    #[error(transparent)]
    Connection(#[from] TransportError),
}

/// Counters a transport keeps, for observability.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransportStats {
    /// Smoothed round-trip time, if measured.
    pub rtt: Option<std::time::Duration>,
    /// Bytes sent, including retransmissions.
    pub bytes_sent: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Packets declared lost.
    pub packets_lost: u64,
    /// The sender's estimate of the available bandwidth, in bits per second.
    pub estimated_bitrate: Option<u64>,
    /// Times the peer moved to a new address (a NAT that rebinds, a client that migrates)
    /// and the connection followed it there, once the new address was validated.
    pub peer_migrations: u64,
    /// Times the transport gave the path the connection was on up (its checks of the
    /// path failed) and fell back to an older one.
    pub path_fallbacks: u64,
}

/// One connection: opens and accepts streams, sends and receives datagrams, closes.
pub trait Session {
    /// The sending half of a stream.
    type SendStream: SendStream;
    /// The receiving half of a stream.
    type RecvStream: RecvStream;

    /// Opens a unidirectional stream; `Pending` while the peer's stream limit is reached.
    fn poll_open_uni(&mut self, waiter: &Waiter) -> Poll<Result<Self::SendStream, TransportError>>;

    /// Opens a bidirectional stream; `Pending` while the peer's stream limit is reached.
    #[allow(clippy::type_complexity)]
    fn poll_open_bidi(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<(Self::SendStream, Self::RecvStream), TransportError>>;

    /// The next unidirectional stream the peer opened.
    fn poll_accept_uni(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<Self::RecvStream, TransportError>>;

    /// The next bidirectional stream the peer opened.
    #[allow(clippy::type_complexity)]
    fn poll_accept_bidi(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<(Self::SendStream, Self::RecvStream), TransportError>>;

    /// Sends a datagram if there is room; a datagram that does not fit is dropped (they are
    /// unreliable by definition), and `Ok` only means it was handed to the connection.
    fn send_datagram(&mut self, payload: Bytes) -> Result<(), TransportError>;

    /// The next datagram received.
    fn poll_recv_datagram(&mut self, waiter: &Waiter) -> Poll<Result<Bytes, TransportError>>;

    /// The largest datagram payload the connection can send now; `None` without datagrams.
    fn max_datagram_size(&self) -> Option<usize>;

    /// Closes the connection with an application code and reason. Idempotent.
    fn close(&mut self, code: u64, reason: &str);

    /// Ready with the reason once the connection is gone.
    fn poll_closed(&mut self, waiter: &Waiter) -> Poll<TransportError>;

    /// The negotiated application protocol (ALPN, or the WebTransport protocol), if any.
    fn protocol(&self) -> Option<&str>;

    /// The connection's counters.
    fn stats(&self) -> TransportStats;

    /// A reader of [`stats`](Self::stats) that any thread may call while the connection
    /// lives, if the transport can give one: a session's handle then reads the counters
    /// when asked, and its machine need not copy them out on every turn (a turn per
    /// message is the chat hot path). `None` (the default): the machine copies them.
    fn stats_reader(&self) -> Option<StatsReader> {
        None
    }
}

/// Reads a connection's counters from any thread ([`Session::stats_reader`]).
#[derive(Clone)]
pub struct StatsReader(std::sync::Arc<dyn Fn() -> TransportStats + Send + Sync>);

impl StatsReader {
    /// A reader that calls `read`.
    pub fn new(read: impl Fn() -> TransportStats + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(read))
    }

    /// The connection's counters now.
    pub fn read(&self) -> TransportStats {
        (self.0)()
    }
}

impl std::fmt::Debug for StatsReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatsReader").finish_non_exhaustive()
    }
}

/// The sending half of a stream.
pub trait SendStream {
    /// Writes from `data`, advancing it past what the stream accepted; `Ready(Ok(()))` once
    /// all of it is accepted. `Pending` while flow control blocks the rest.
    fn poll_write(&mut self, waiter: &Waiter, data: &mut Bytes) -> Poll<Result<(), StreamError>>;

    /// Ends the stream after everything written (FIN).
    fn finish(&mut self) -> Result<(), StreamError>;

    /// Writes the stream's last bytes and ends it: `Ready(Ok(()))` once all of `data` is
    /// accepted and the FIN is queued behind it.
    ///
    /// Prefer this to [`poll_write`](Self::poll_write) then [`finish`](Self::finish) when
    /// the end is known: a transport can put the FIN in the same frame as the last bytes
    /// instead of sending a separate, empty one (see the QUIC adapter for why that
    /// matters). The default writes, then finishes.
    fn poll_write_final(
        &mut self,
        waiter: &Waiter,
        data: &mut Bytes,
    ) -> Poll<Result<(), StreamError>> {
        match self.poll_write(waiter, data) {
            Poll::Ready(Ok(())) => Poll::Ready(self.finish()),
            other => other,
        }
    }

    /// Abandons the stream with an error code (RESET_STREAM).
    fn reset(&mut self, code: u64);

    /// Sets the stream's place in the session's sending order: a greater
    /// [`StreamPriority`] is sent first.
    fn set_priority(&mut self, priority: StreamPriority);

    /// Ready with the code once the peer asks this side to stop sending (STOP_SENDING).
    fn poll_stopped(&mut self, waiter: &Waiter) -> Poll<Result<u64, StreamError>>;
}

/// The receiving half of a stream.
pub trait RecvStream {
    /// The next chunk of data; `Ok(None)` at the end of the stream (FIN).
    fn poll_read(&mut self, waiter: &Waiter) -> Poll<Result<Option<Bytes>, StreamError>>;

    /// Whether the end of the stream came with the data already read: the next
    /// [`poll_read`](Self::poll_read) reports it. Lets a reader act on its last bytes and
    /// the end at once (a relay forwards a group's last frame with its end, so that the
    /// FIN rides with the bytes). `false` when not known, which is always correct.
    fn at_end(&self) -> bool {
        false
    }

    /// Asks the peer to stop sending (STOP_SENDING) with an error code.
    fn stop(&mut self, code: u64);
}
