//! One transport type for both moq-lite bindings, so that one runtime (whose `Transport`
//! is a single type) serves raw QUIC and WebTransport sessions on the same port.

use std::task::Poll;

use bytes::Bytes;
use kio::Waiter;
use moq_net::transport::{
    RecvStream, SendStream, Session, StreamError, StreamPriority, TransportError, TransportStats,
};

use crate::quic::{QuicRecvStream, QuicSendStream, QuicSession};
use crate::webtransport::{WebTransportRecvStream, WebTransportSendStream, WebTransportSession};

/// A session over either binding: raw QUIC (ALPN `moq-lite-05`) or WebTransport (ALPN `h3`).
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
    /// Which binding: `"quic"` or `"webtransport"`.
    pub fn binding(&self) -> &'static str {
        match self {
            Self::Quic(_) => "quic",
            Self::WebTransport(_) => "webtransport",
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

    fn stop(&mut self, code: u64) {
        either!(self, stream => stream.stop(code))
    }
}
