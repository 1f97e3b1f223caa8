//! An established WebTransport session: `moqx_net::transport` over one HTTP/3 connection.

use std::task::Poll;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use moqx_kio::Waiter;
use moqx_net::transport::{
    RecvStream, SendStream, Session, StreamError, TransportError, TransportStats,
};

use super::control::{ConnectStream, OwnControlStream, varint};
use super::demux::{Demux, DemuxError};
use super::header::{bidi_header, uni_header};
use super::stream::{WebTransportRecvStream, WebTransportSendStream};
use super::{H3_ID_ERROR, H3_MESSAGE_ERROR, H3_NO_ERROR, from_http3, to_http3};
use crate::quic::{QuicRecvStream, QuicSendStream, QuicSession};

/// One WebTransport session over an HTTP/3 connection (one session per connection): its
/// streams carry the session's stream headers, its datagrams the session's quarter stream
/// id, its stream and close codes travel in HTTP/3's WebTransport code space, and its
/// CONNECT stream carries the closing capsule. Made by
/// [`ClientHandshake`](super::ClientHandshake) or
/// [`WebTransportRequest::accept`](super::WebTransportRequest::accept).
#[derive(Debug)]
pub struct WebTransportSession {
    inner: QuicSession,
    /// The session id: the CONNECT stream's id.
    id: u64,
    demux: Demux,
    /// Our HTTP/3 control stream, open for the connection's life (closing it is an error).
    _control: OwnControlStream,
    connect: ConnectStream,
    protocol: Option<String>,
    /// Why the session ended, once it did through the CONNECT stream.
    closed: Option<TransportError>,
    /// The header of every stream this side opens one way (made once: each stream
    /// shares it).
    uni_header: Bytes,
    opening_bidi: Option<(QuicSendStream, QuicRecvStream, Bytes)>,
    /// The quarter stream id every datagram starts with.
    datagram_prefix: Bytes,
}

impl WebTransportSession {
    pub(crate) fn new(
        inner: QuicSession,
        demux: Demux,
        control: OwnControlStream,
        connect: ConnectStream,
        protocol: Option<String>,
    ) -> Self {
        let id = connect.send.id();
        let mut datagram_prefix = BytesMut::new();
        varint(id / 4).encode(&mut datagram_prefix);
        Self {
            inner,
            id,
            demux,
            _control: control,
            connect,
            protocol,
            closed: None,
            uni_header: uni_header(id),
            opening_bidi: None,
            datagram_prefix: datagram_prefix.freeze(),
        }
    }

    /// The session id (the CONNECT stream's id).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Sorts incoming streams; a peer that broke HTTP/3 closes the connection.
    fn poll_demux(&mut self, waiter: &Waiter) -> Result<(), TransportError> {
        if let Some(error) = &self.closed {
            return Err(error.clone());
        }
        match self.demux.poll(&mut self.inner, waiter) {
            Ok(()) => Ok(()),
            Err(DemuxError::Transport(error)) => Err(self.map_close(error)),
            Err(DemuxError::Protocol { code, reason }) => Err(self.fail(code, reason)),
        }
    }

    /// Sorting for one accept may queue a stream of the other kind, which nothing else
    /// would announce: wake the caller to accept it too.
    fn wake_for_other_queue(&self, waiter: &Waiter, other_has_streams: bool) {
        if other_has_streams && let Some(waker) = waiter.waker() {
            waker.wake();
        }
    }

    /// Closes the connection for an HTTP/3 violation and remembers why.
    fn fail(&mut self, code: u64, reason: String) -> TransportError {
        self.inner.close(code, &reason);
        let error = TransportError::Closed {
            code,
            reason,
            remote: false,
        };
        self.closed = Some(error.clone());
        error
    }

    /// A connection close, with its code moved back out of the WebTransport code space.
    fn map_close(&self, error: TransportError) -> TransportError {
        match error {
            TransportError::Closed {
                code,
                reason,
                remote,
            } => TransportError::Closed {
                code: if code == H3_NO_ERROR {
                    0
                } else {
                    from_http3(code)
                },
                reason,
                remote,
            },
            other => other,
        }
    }

    /// Flushes the response, reads capsules: ready once the peer ended the session.
    fn poll_connect_stream(&mut self, waiter: &Waiter) -> Poll<TransportError> {
        match self.connect.poll(waiter) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok((code, reason))) => {
                self.inner.close(H3_NO_ERROR, "");
                let error = TransportError::Closed {
                    code: code.into(),
                    reason,
                    remote: true,
                };
                self.closed = Some(error.clone());
                Poll::Ready(error)
            }
            Poll::Ready(Err(reason)) => Poll::Ready(self.fail(H3_MESSAGE_ERROR, reason)),
        }
    }
}

impl Session for WebTransportSession {
    type SendStream = WebTransportSendStream;
    type RecvStream = WebTransportRecvStream;

    fn poll_open_uni(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<WebTransportSendStream, TransportError>> {
        if let Some(error) = &self.closed {
            return Poll::Ready(Err(error.clone()));
        }
        // The stream header goes out with the stream's first write, in the same STREAM
        // frame (and quiche call): written on its own, it cost a write of its own and
        // queued the stream before its priority was set (`stream.rs`).
        match self.inner.poll_open_uni(waiter) {
            Poll::Ready(Ok(stream)) => Poll::Ready(Ok(WebTransportSendStream::with_header(
                stream,
                self.uni_header.clone(),
            ))),
            Poll::Ready(Err(error)) => Poll::Ready(Err(self.map_close(error))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_open_bidi(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<(WebTransportSendStream, WebTransportRecvStream), TransportError>> {
        if let Some(error) = &self.closed {
            return Poll::Ready(Err(error.clone()));
        }
        if self.opening_bidi.is_none() {
            let (send, recv) = match self.inner.poll_open_bidi(waiter) {
                Poll::Ready(Ok(pair)) => pair,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(self.map_close(error))),
                Poll::Pending => return Poll::Pending,
            };
            self.opening_bidi = Some((send, recv, bidi_header(self.id)));
        }
        let Some((send, _, header)) = &mut self.opening_bidi else {
            return Poll::Pending;
        };
        match send.poll_write(waiter, header) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(result) => {
                let (send, recv, _) = self.opening_bidi.take().expect("checked above");
                Poll::Ready(match result {
                    Ok(()) => Ok((
                        WebTransportSendStream::new(send),
                        WebTransportRecvStream::new(recv, Bytes::new()),
                    )),
                    Err(error) => Err(stream_to_transport(error)),
                })
            }
        }
    }

    fn poll_accept_uni(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<WebTransportRecvStream, TransportError>> {
        if let Err(error) = self.poll_demux(waiter) {
            return Poll::Ready(Err(error));
        }
        self.wake_for_other_queue(waiter, !self.demux.bidi.is_empty());
        while let Some((session, mut stream)) = self.demux.uni.pop_front() {
            if session == self.id {
                return Poll::Ready(Ok(stream));
            }
            stream.inner.stop(H3_ID_ERROR);
        }
        Poll::Pending
    }

    fn poll_accept_bidi(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<(WebTransportSendStream, WebTransportRecvStream), TransportError>> {
        if let Err(error) = self.poll_demux(waiter) {
            return Poll::Ready(Err(error));
        }
        self.wake_for_other_queue(waiter, !self.demux.uni.is_empty());
        while let Some((session, mut send, mut recv)) = self.demux.bidi.pop_front() {
            if session == self.id {
                return Poll::Ready(Ok((send, recv)));
            }
            send.inner.reset(H3_ID_ERROR);
            recv.inner.stop(H3_ID_ERROR);
        }
        Poll::Pending
    }

    fn send_datagram(&mut self, payload: Bytes) -> Result<(), TransportError> {
        if let Some(error) = &self.closed {
            return Err(error.clone());
        }
        let mut datagram = BytesMut::with_capacity(self.datagram_prefix.len() + payload.len());
        datagram.put_slice(&self.datagram_prefix);
        datagram.put_slice(&payload);
        self.inner
            .send_datagram(datagram.freeze())
            .map_err(|error| self.map_close(error))
    }

    fn poll_recv_datagram(&mut self, waiter: &Waiter) -> Poll<Result<Bytes, TransportError>> {
        loop {
            if let Some(error) = &self.closed {
                return Poll::Ready(Err(error.clone()));
            }
            let mut datagram = match self.inner.poll_recv_datagram(waiter) {
                Poll::Ready(Ok(datagram)) => datagram,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(self.map_close(error))),
                Poll::Pending => return Poll::Pending,
            };
            // Datagrams of another session, or too short to name one, are dropped.
            if datagram.starts_with(&self.datagram_prefix) {
                datagram.advance(self.datagram_prefix.len());
                return Poll::Ready(Ok(datagram));
            }
        }
    }

    fn max_datagram_size(&self) -> Option<usize> {
        self.inner
            .max_datagram_size()
            .and_then(|size| size.checked_sub(self.datagram_prefix.len()))
    }

    fn close(&mut self, code: u64, reason: &str) {
        if self.closed.is_some() {
            return;
        }
        let code = u32::try_from(code).unwrap_or(u32::MAX);
        self.connect.send_close(code, reason);
        // The capsule is best effort (quiche may not send stream data queued before the
        // close): the connection close carries the same code, in WebTransport's space.
        self.inner.close(to_http3(code), reason);
        self.closed = Some(TransportError::Closed {
            code: code.into(),
            reason: reason.to_owned(),
            remote: false,
        });
    }

    fn poll_closed(&mut self, waiter: &Waiter) -> Poll<TransportError> {
        if let Some(error) = &self.closed {
            return Poll::Ready(error.clone());
        }
        if let Poll::Ready(error) = self.inner.poll_closed(waiter) {
            return Poll::Ready(self.map_close(error));
        }
        self.poll_connect_stream(waiter)
    }

    fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    fn stats(&self) -> TransportStats {
        self.inner.stats()
    }

    fn stats_reader(&self) -> Option<moqx_net::transport::StatsReader> {
        self.inner.stats_reader()
    }
}

fn stream_to_transport(error: StreamError) -> TransportError {
    match error {
        StreamError::Connection(error) => error,
        other => TransportError::Lost(format!("opening a stream: {other}")),
    }
}
