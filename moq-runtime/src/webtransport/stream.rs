//! A WebTransport session's streams: QUIC streams whose codes travel in HTTP/3's
//! WebTransport code space, and whose first bytes (read with the stream header) come first.

use std::task::Poll;

use bytes::Bytes;
use moqx_kio::Waiter;
use moqx_net::transport::{RecvStream, SendStream, StreamError, StreamPriority};

use super::header::map_stream_error;
use super::{from_http3, to_http3};
use crate::quic::{QuicRecvStream, QuicSendStream};

/// The sending half of a WebTransport stream.
#[derive(Debug)]
pub struct WebTransportSendStream {
    pub(super) inner: QuicSendStream,
}

/// The receiving half of a WebTransport stream.
#[derive(Debug)]
pub struct WebTransportRecvStream {
    pub(super) inner: QuicRecvStream,
    /// Payload read along with the stream header, delivered first.
    first: Option<Bytes>,
}

impl WebTransportSendStream {
    pub(crate) fn new(inner: QuicSendStream) -> Self {
        Self { inner }
    }
}

impl SendStream for WebTransportSendStream {
    fn poll_write(&mut self, waiter: &Waiter, data: &mut Bytes) -> Poll<Result<(), StreamError>> {
        self.inner
            .poll_write(waiter, data)
            .map_err(map_stream_error)
    }

    fn finish(&mut self) -> Result<(), StreamError> {
        self.inner.finish().map_err(map_stream_error)
    }

    fn poll_write_final(
        &mut self,
        waiter: &Waiter,
        data: &mut Bytes,
    ) -> Poll<Result<(), StreamError>> {
        self.inner
            .poll_write_final(waiter, data)
            .map_err(map_stream_error)
    }

    fn reset(&mut self, code: u64) {
        self.inner.reset(to_http3(clamp(code)));
    }

    fn set_priority(&mut self, priority: StreamPriority) {
        self.inner.set_priority(priority);
    }

    fn poll_stopped(&mut self, waiter: &Waiter) -> Poll<Result<u64, StreamError>> {
        self.inner
            .poll_stopped(waiter)
            .map(|result| result.map(from_http3).map_err(map_stream_error))
    }
}

impl WebTransportRecvStream {
    pub(crate) fn new(inner: QuicRecvStream, first: Bytes) -> Self {
        Self {
            inner,
            first: (!first.is_empty()).then_some(first),
        }
    }
}

impl RecvStream for WebTransportRecvStream {
    fn poll_read(&mut self, waiter: &Waiter) -> Poll<Result<Option<Bytes>, StreamError>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Ok(Some(first)));
        }
        self.inner.poll_read(waiter).map_err(map_stream_error)
    }

    fn at_end(&self) -> bool {
        self.first.is_none() && self.inner.at_end()
    }

    fn stop(&mut self, code: u64) {
        self.inner.stop(to_http3(clamp(code)));
    }
}

/// WebTransport stream codes are 32 bits.
pub(super) fn clamp(code: u64) -> u32 {
    u32::try_from(code).unwrap_or(u32::MAX)
}
