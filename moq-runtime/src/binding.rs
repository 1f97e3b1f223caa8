//! One transport type for both moq-lite bindings, so that one runtime (whose `Transport`
//! is a single type) serves raw QUIC and WebTransport sessions on the same port.

use std::task::Poll;

use bytes::Bytes;
use kio::Waiter;
use moq_net::coding::Version;
use moq_net::transport::{
    RecvStream, SendStream, Session, StreamError, StreamPriority, TransportError, TransportStats,
};

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
}

impl Binding {
    /// The ALPN a connection of this binding at `version` offers.
    pub fn alpn(self, version: Version) -> &'static str {
        match self {
            Self::Quic => version.alpn(),
            Self::WebTransport => crate::webtransport::ALPN,
        }
    }

    /// The binding a negotiated ALPN names, if it is one of ours.
    pub fn from_alpn(alpn: &[u8]) -> Option<Self> {
        if alpn == crate::webtransport::ALPN.as_bytes() {
            return Some(Self::WebTransport);
        }
        let alpn = std::str::from_utf8(alpn).ok()?;
        Version::from_alpn(alpn).map(|_| Self::Quic)
    }

    /// `"quic"` or `"webtransport"`, for logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Self::Quic => "quic",
            Self::WebTransport => "webtransport",
        }
    }
}

impl std::fmt::Display for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A session over either binding: raw QUIC (ALPN `moq-lite-05` or another version) or WebTransport (ALPN `h3`).
#[derive(Debug)]
pub enum BindingSession {
    /// Raw QUIC: MoQ streams are QUIC streams.
    Quic(QuicSession),
    /// WebTransport over HTTP/3 (boxed: it carries the HTTP/3 state besides the
    /// connection handle).
    WebTransport(Box<WebTransportSession>),
}

/// The sending half of a stream of a [`BindingSession`].
#[derive(Debug)]
pub enum BindingSendStream {
    /// A raw QUIC stream.
    Quic(QuicSendStream),
    /// A WebTransport stream.
    WebTransport(WebTransportSendStream),
}

/// The receiving half of a stream of a [`BindingSession`].
#[derive(Debug)]
pub enum BindingRecvStream {
    /// A raw QUIC stream.
    Quic(QuicRecvStream),
    /// A WebTransport stream.
    WebTransport(WebTransportRecvStream),
}

impl BindingSession {
    /// Which binding it runs over.
    pub fn binding(&self) -> Binding {
        match self {
            Self::Quic(_) => Binding::Quic,
            Self::WebTransport(_) => Binding::WebTransport,
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

/// Runs `$body` on whichever binding `$value` holds (for methods that return no stream).
macro_rules! either {
    ($value:expr, $inner:ident => $body:expr) => {
        match $value {
            Self::Quic($inner) => $body,
            Self::WebTransport($inner) => $body,
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
        }
    }

    fn send_datagram(&mut self, payload: Bytes) -> Result<(), TransportError> {
        either!(self, session => session.send_datagram(payload))
    }

    fn poll_recv_datagram(&mut self, waiter: &Waiter) -> Poll<Result<Bytes, TransportError>> {
        either!(self, session => session.poll_recv_datagram(waiter))
    }

    fn max_datagram_size(&self) -> Option<usize> {
        either!(self, session => session.max_datagram_size())
    }

    fn close(&mut self, code: u64, reason: &str) {
        either!(self, session => session.close(code, reason))
    }

    fn poll_closed(&mut self, waiter: &Waiter) -> Poll<TransportError> {
        either!(self, session => session.poll_closed(waiter))
    }

    fn protocol(&self) -> Option<&str> {
        either!(self, session => session.protocol())
    }

    fn stats(&self) -> TransportStats {
        either!(self, session => session.stats())
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
