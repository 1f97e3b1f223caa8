//! Reading a peer-opened stream's header off the stream (what it says is parsed in
//! `moqx-webtransport-wire`).

use std::task::Poll;

use bytes::{Bytes, BytesMut};
use moqx_kio::Waiter;
use moqx_net::transport::{RecvStream, StreamError};
pub(crate) use moqx_webtransport_wire::header::{
    BidiKind, UniKind, bidi_header, parse_bidi, parse_uni, uni_header,
};

use crate::quic::QuicRecvStream;

/// A peer-opened stream whose header is still arriving.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub(crate) stream: QuicRecvStream,
    /// Bytes read so far (empty while every chunk held a whole header).
    buffered: BytesMut,
}

/// How reading a header ended.
#[derive(Debug)]
pub(crate) enum HeaderRead<K> {
    /// The header: its kind, and the bytes after it (the stream's first payload).
    Parsed(K, Bytes),
    /// The stream ended, or was reset, before its header was complete: drop it.
    Gone,
}

impl Incoming {
    pub(crate) fn new(stream: QuicRecvStream) -> Self {
        Self {
            stream,
            buffered: BytesMut::new(),
        }
    }

    /// Reads until `parse` recognizes a header; waits on `waiter` for more bytes.
    pub(crate) fn poll_header<K>(
        &mut self,
        waiter: &Waiter,
        parse: impl Fn(&[u8]) -> Option<(K, usize)>,
    ) -> Poll<HeaderRead<K>> {
        loop {
            let chunk = match self.stream.poll_read(waiter) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(Some(chunk))) => chunk,
                Poll::Ready(Ok(None)) | Poll::Ready(Err(_)) => {
                    return Poll::Ready(HeaderRead::Gone);
                }
            };
            // The common case: the whole header is in the first chunk, parsed in place.
            if self.buffered.is_empty()
                && let Some((kind, len)) = parse(&chunk)
            {
                return Poll::Ready(HeaderRead::Parsed(kind, chunk.slice(len..)));
            }
            self.buffered.extend_from_slice(&chunk);
            if let Some((kind, len)) = parse(&self.buffered) {
                let rest = self.buffered.split_off(len).freeze();
                return Poll::Ready(HeaderRead::Parsed(kind, rest));
            }
        }
    }
}

/// Maps a stream error's codes back from the HTTP/3 space WebTransport codes travel in.
pub(crate) fn map_stream_error(error: StreamError) -> StreamError {
    match error {
        StreamError::Reset(code) => StreamError::Reset(super::from_http3(code)),
        StreamError::Stopped(code) => StreamError::Stopped(super::from_http3(code)),
        other => other,
    }
}
