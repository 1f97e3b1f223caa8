//! One transport type for every moq-lite binding, so that one runtime (whose `Transport`
//! is a single type) serves raw QUIC, WebTransport and QMux sessions side by side.

use std::task::Poll;

use bytes::Bytes;
use moqx_kio::Waiter;
use moqx_net::coding::Version;
use moqx_net::transport::{
    RecvStream, SendStream, Session, StreamError, StreamPriority, TransportError, TransportStats,
};

use moqx_qmux::{QmuxRecvStream, QmuxSendStream, QmuxSession};

use crate::quic::{QuicRecvStream, QuicSendStream, QuicSession};
use crate::webtransport::{WebTransportRecvStream, WebTransportSendStream, WebTransportSession};

/// Which moq-lite binding a connection speaks, told apart by its ALPN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Binding {
    /// Raw QUIC: the ALPN is the moq-lite version (`moq-lite-05`, `-04`, `-03`, chosen by the server); the path arrives in
    /// the client's SETUP.
    Quic,
    /// WebTransport over HTTP/3: ALPN `h3`; the version is chosen in the CONNECT
    /// (`wt-available-protocols`), the path is the CONNECT's.
    WebTransport,
    /// QMux over a WebSocket (`ws://`, `wss://`): the version is chosen by the
    /// subprotocol (`qmux-01.moq-lite-05`), the path is the upgrade request's.
    WebSocket,
    /// QMux over TLS over TCP (`tls://`): the version is chosen by ALPN
    /// (`qmux-01.moq-lite-05`); the path arrives in SETUP.
    Tls,
    /// QMux over plain TCP (`tcp://`, trusted networks only): the version is chosen in
    /// the QMux transport parameters; the path arrives in SETUP.
    Tcp,
}

impl Binding {
    /// The QUIC ALPN a connection of this binding at `version` offers (`None` for the
    /// QMux bindings, which are not QUIC).
    pub fn alpn(self, version: Version) -> Option<&'static str> {
        match self {
            Self::Quic => Some(version.alpn()),
            Self::WebTransport => Some(crate::webtransport::ALPN),
            Self::WebSocket | Self::Tls | Self::Tcp => None,
        }
    }

    /// Whether it runs over QMux on a byte stream (no datagrams, no migration).
    pub fn is_qmux(self) -> bool {
        matches!(self, Self::WebSocket | Self::Tls | Self::Tcp)
    }

    /// The binding a negotiated ALPN names, if it is one of ours.
    pub fn from_alpn(alpn: &[u8]) -> Option<Self> {
        if alpn == crate::webtransport::ALPN.as_bytes() {
            return Some(Self::WebTransport);
        }
        let alpn = std::str::from_utf8(alpn).ok()?;
        Version::from_alpn(alpn).map(|_| Self::Quic)
    }

    /// `"quic"`, `"webtransport"`, `"websocket"`, `"tls"` or `"tcp"`, for logs and
    /// metrics.
    pub fn name(self) -> &'static str {
        match self {
            Self::Quic => "quic",
            Self::WebTransport => "webtransport",
            Self::WebSocket => "websocket",
            Self::Tls => "tls",
            Self::Tcp => "tcp",
        }
    }

    /// Every binding, for metrics that list each.
    pub const ALL: [Binding; 5] = [
        Self::Quic,
        Self::WebTransport,
        Self::WebSocket,
        Self::Tls,
        Self::Tcp,
    ];
}

impl std::fmt::Display for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A session over any binding: raw QUIC (ALPN `moq-lite-05` or another version),
/// WebTransport (ALPN `h3`), or QMux over a WebSocket, TLS or TCP.
#[derive(Debug)]
pub enum BindingSession {
    /// Raw QUIC: MoQ streams are QUIC streams.
    Quic(QuicSession),
    /// WebTransport over HTTP/3 (boxed: it carries the HTTP/3 state besides the
    /// connection handle).
    WebTransport(Box<WebTransportSession>),
    /// QMux over a byte stream, which of them `binding` says.
    Qmux {
        /// The session.
        session: QmuxSession,
        /// Its carrier: [`Binding::WebSocket`], [`Binding::Tls`] or [`Binding::Tcp`].
        binding: Binding,
    },
}

/// The sending half of a stream of a [`BindingSession`].
#[derive(Debug)]
pub enum BindingSendStream {
    /// A raw QUIC stream.
    Quic(QuicSendStream),
    /// A WebTransport stream.
    WebTransport(WebTransportSendStream),
    /// A QMux stream.
    Qmux(QmuxSendStream),
}

/// The receiving half of a stream of a [`BindingSession`].
#[derive(Debug)]
pub enum BindingRecvStream {
    /// A raw QUIC stream.
    Quic(QuicRecvStream),
    /// A WebTransport stream.
    WebTransport(WebTransportRecvStream),
    /// A QMux stream.
    Qmux(QmuxRecvStream),
}

impl BindingSession {
    /// Which binding it runs over.
    pub fn binding(&self) -> Binding {
        match self {
            Self::Quic(_) => Binding::Quic,
            Self::WebTransport(_) => Binding::WebTransport,
            Self::Qmux { binding, .. } => *binding,
        }
    }
}

impl From<QuicSession> for BindingSession {
    fn from(session: QuicSession) -> Self {
        Self::Quic(session)
    }
}

impl From<WebTransportSession> for BindingSession {
    fn from(session: WebTransportSession) -> Self {
        Self::WebTransport(Box::new(session))
    }
}

/// Runs `$body` on whichever session `$value` holds (for methods that return no stream).
macro_rules! either_session {
    ($value:expr, $inner:ident => $body:expr) => {
        match $value {
            Self::Quic($inner) => $body,
            Self::WebTransport($inner) => $body,
            Self::Qmux {
                session: $inner, ..
            } => $body,
        }
    };
}

/// Runs `$body` on whichever stream `$value` holds.
macro_rules! either {
    ($value:expr, $inner:ident => $body:expr) => {
        match $value {
            Self::Quic($inner) => $body,
            Self::WebTransport($inner) => $body,
            Self::Qmux($inner) => $body,
        }
    };
}

impl Session for BindingSession {
    type SendStream = BindingSendStream;
    type RecvStream = BindingRecvStream;

    fn poll_open_uni(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<BindingSendStream, TransportError>> {
        match self {
            Self::Quic(session) => session
                .poll_open_uni(waiter)
                .map_ok(BindingSendStream::Quic),
            Self::WebTransport(session) => session
                .poll_open_uni(waiter)
                .map_ok(BindingSendStream::WebTransport),
            Self::Qmux { session, .. } => session
                .poll_open_uni(waiter)
                .map_ok(BindingSendStream::Qmux),
        }
    }

    fn poll_open_bidi(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<(BindingSendStream, BindingRecvStream), TransportError>> {
        match self {
            Self::Quic(session) => session.poll_open_bidi(waiter).map_ok(|(send, recv)| {
                (BindingSendStream::Quic(send), BindingRecvStream::Quic(recv))
            }),
            Self::WebTransport(session) => session.poll_open_bidi(waiter).map_ok(|(send, recv)| {
                (
                    BindingSendStream::WebTransport(send),
                    BindingRecvStream::WebTransport(recv),
                )
            }),
            Self::Qmux { session, .. } => session.poll_open_bidi(waiter).map_ok(|(send, recv)| {
                (BindingSendStream::Qmux(send), BindingRecvStream::Qmux(recv))
            }),
        }
    }

    fn poll_accept_uni(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<BindingRecvStream, TransportError>> {
        match self {
            Self::Quic(session) => session
                .poll_accept_uni(waiter)
                .map_ok(BindingRecvStream::Quic),
            Self::WebTransport(session) => session
                .poll_accept_uni(waiter)
                .map_ok(BindingRecvStream::WebTransport),
            Self::Qmux { session, .. } => session
                .poll_accept_uni(waiter)
                .map_ok(BindingRecvStream::Qmux),
        }
    }

    fn poll_accept_bidi(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<(BindingSendStream, BindingRecvStream), TransportError>> {
        match self {
            Self::Quic(session) => session.poll_accept_bidi(waiter).map_ok(|(send, recv)| {
                (BindingSendStream::Quic(send), BindingRecvStream::Quic(recv))
            }),
            Self::WebTransport(session) => {
                session.poll_accept_bidi(waiter).map_ok(|(send, recv)| {
                    (
                        BindingSendStream::WebTransport(send),
                        BindingRecvStream::WebTransport(recv),
                    )
                })
            }
            Self::Qmux { session, .. } => {
                session.poll_accept_bidi(waiter).map_ok(|(send, recv)| {
                    (BindingSendStream::Qmux(send), BindingRecvStream::Qmux(recv))
                })
            }
        }
    }

    fn send_datagram(&mut self, payload: Bytes) -> Result<(), TransportError> {
        either_session!(self, session => session.send_datagram(payload))
    }

    fn poll_recv_datagram(&mut self, waiter: &Waiter) -> Poll<Result<Bytes, TransportError>> {
        either_session!(self, session => session.poll_recv_datagram(waiter))
    }

    fn max_datagram_size(&self) -> Option<usize> {
        either_session!(self, session => session.max_datagram_size())
    }

    fn close(&mut self, code: u64, reason: &str) {
        either_session!(self, session => session.close(code, reason))
    }

    fn poll_closed(&mut self, waiter: &Waiter) -> Poll<TransportError> {
        either_session!(self, session => session.poll_closed(waiter))
    }

    fn protocol(&self) -> Option<&str> {
        either_session!(self, session => session.protocol())
    }

    fn stats(&self) -> TransportStats {
        either_session!(self, session => session.stats())
    }

    fn stats_reader(&self) -> Option<moqx_net::transport::StatsReader> {
        either_session!(self, session => session.stats_reader())
    }
}

impl SendStream for BindingSendStream {
    fn poll_write(&mut self, waiter: &Waiter, data: &mut Bytes) -> Poll<Result<(), StreamError>> {
        either!(self, stream => stream.poll_write(waiter, data))
    }

    fn finish(&mut self) -> Result<(), StreamError> {
        either!(self, stream => stream.finish())
    }

    fn poll_write_final(
        &mut self,
        waiter: &Waiter,
        data: &mut Bytes,
    ) -> Poll<Result<(), StreamError>> {
        either!(self, stream => stream.poll_write_final(waiter, data))
    }

    fn reset(&mut self, code: u64) {
        either!(self, stream => stream.reset(code))
    }

    fn set_priority(&mut self, priority: StreamPriority) {
        either!(self, stream => stream.set_priority(priority))
    }

    fn poll_stopped(&mut self, waiter: &Waiter) -> Poll<Result<u64, StreamError>> {
        either!(self, stream => stream.poll_stopped(waiter))
    }
}

impl RecvStream for BindingRecvStream {
    fn poll_read(&mut self, waiter: &Waiter) -> Poll<Result<Option<Bytes>, StreamError>> {
        either!(self, stream => stream.poll_read(waiter))
    }

    fn at_end(&self) -> bool {
        either!(self, stream => stream.at_end())
    }

    fn stop(&mut self, code: u64) {
        either!(self, stream => stream.stop(code))
    }
}
