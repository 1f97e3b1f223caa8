//! A WebTransport session's streams: QUIC streams whose codes travel in HTTP/3's
//! WebTransport code space, and whose first bytes (read with the stream header) come first.

use std::task::Poll;

use bytes::{Buf, Bytes, BytesMut};
use moqx_kio::Waiter;
use moqx_net::transport::{RecvStream, SendStream, StreamError, StreamPriority};

use super::header::map_stream_error;
use super::{from_http3, to_http3};
use crate::quic::{QuicRecvStream, QuicSendStream};

/// The sending half of a WebTransport stream.
#[derive(Debug)]
pub struct WebTransportSendStream {
    pub(super) inner: QuicSendStream,
    /// What is left to write of the stream header (type and session id) on a stream this
    /// side opened: it goes out in front of the first write.
    header: Option<Bytes>,
}

/// A first write up to this size is copied behind the stream header, so that the two go
/// to quiche as one write; a larger one follows the header as a write of its own.
const COALESCE_LIMIT: usize = 4096;

/// The receiving half of a WebTransport stream.
#[derive(Debug)]
pub struct WebTransportRecvStream {
    pub(super) inner: QuicRecvStream,
    /// Payload read along with the stream header, delivered first.
    first: Option<Bytes>,
}

impl WebTransportSendStream {
    /// A stream whose header was written already (or that has none to write).
    pub(crate) fn new(inner: QuicSendStream) -> Self {
        Self {
            inner,
            header: None,
        }
    }

    /// A stream this side opened, `header` still to write.
    pub(crate) fn with_header(inner: QuicSendStream, header: Bytes) -> Self {
        Self {
            inner,
            header: Some(header),
        }
    }

    /// Writes `data` (with the FIN behind it if `fin`), the stream header first while any
    /// of it is left.
    fn poll_send(
        &mut self,
        waiter: &Waiter,
        data: &mut Bytes,
        fin: bool,
    ) -> Poll<Result<(), StreamError>> {
        if let Some(header) = &mut self.header {
            if data.len() <= COALESCE_LIMIT {
                let mut both = BytesMut::with_capacity(header.len() + data.len());
                both.extend_from_slice(header);
                both.extend_from_slice(data);
                let mut both = both.freeze();
                let total = both.len();
                let result = send(&mut self.inner, waiter, &mut both, fin);
                let written = total - both.len();
                if written >= header.len() {
                    data.advance(written - header.len());
                    self.header = None;
                } else {
                    header.advance(written);
                }
                return result;
            }
            match self.inner.poll_write(waiter, header) {
                Poll::Ready(Ok(())) => self.header = None,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(map_stream_error(error))),
                Poll::Pending => return Poll::Pending,
            }
        }
        send(&mut self.inner, waiter, data, fin)
    }
}

/// Writes `data` to `stream`, with the FIN behind it if `fin`.
fn send(
    stream: &mut QuicSendStream,
    waiter: &Waiter,
    data: &mut Bytes,
    fin: bool,
) -> Poll<Result<(), StreamError>> {
    let result = match fin {
        true => stream.poll_write_final(waiter, data),
        false => stream.poll_write(waiter, data),
    };
    result.map_err(map_stream_error)
}

impl SendStream for WebTransportSendStream {
    fn poll_write(&mut self, waiter: &Waiter, data: &mut Bytes) -> Poll<Result<(), StreamError>> {
        self.poll_send(waiter, data, false)
    }

    fn finish(&mut self) -> Result<(), StreamError> {
        if let Some(mut header) = self.header.take() {
            // Nothing was written: the header and the FIN, now or not at all (an empty
            // WebTransport stream is one the peer could not place anyway).
            self.inner.try_write(&mut header, true);
            if !header.is_empty() {
                self.inner.reset(to_http3(0));
                return Err(StreamError::Connection(
                    moqx_net::transport::TransportError::Lost(
                        "no flow control credit for an empty stream's header".to_owned(),
                    ),
                ));
            }
            return Ok(());
        }
        self.inner.finish().map_err(map_stream_error)
    }

    fn poll_write_final(
        &mut self,
        waiter: &Waiter,
        data: &mut Bytes,
    ) -> Poll<Result<(), StreamError>> {
        self.poll_send(waiter, data, true)
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
