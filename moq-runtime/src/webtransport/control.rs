//! The two HTTP/3 streams a WebTransport session keeps besides its own: our control
//! stream, and the CONNECT stream that carries the session's close.

use std::task::Poll;

use bytes::{BufMut, Bytes, BytesMut};
use moqx_kio::Waiter;
use moqx_net::transport::{RecvStream, SendStream, StreamError};
use moqx_webtransport_wire::capsule::CapsuleReader;
use web_transport_proto::{Capsule, Frame, VarInt};

use crate::quic::{QuicRecvStream, QuicSendStream};

/// Our HTTP/3 control stream once its SETTINGS are written. It lives as long as the
/// connection (RFC 9114 §6.2.1: closing it is a connection error), so dropping the handle
/// leaves the stream open.
#[derive(Debug)]
pub(crate) struct OwnControlStream(Option<QuicSendStream>);

impl OwnControlStream {
    pub(crate) fn new(stream: QuicSendStream) -> Self {
        Self(Some(stream))
    }
}

impl Drop for OwnControlStream {
    fn drop(&mut self) {
        if let Some(stream) = self.0.take() {
            stream.leave_open();
        }
    }
}

/// The CONNECT stream after its headers: HTTP/3 frames whose DATA carries capsules
/// (RFC 9297 §3.2).
#[derive(Debug)]
pub(crate) struct ConnectStream {
    pub(super) send: QuicSendStream,
    recv: QuicRecvStream,
    /// Bytes still to write (the server's response).
    outbox: Bytes,
    /// What was read, parsed into frames and capsules.
    capsules: CapsuleReader,
}

impl ConnectStream {
    /// The CONNECT stream after its headers: `outbox` still to write (a server's
    /// response), `frames` already read past the headers.
    pub(crate) fn new(
        send: QuicSendStream,
        recv: QuicRecvStream,
        outbox: Bytes,
        frames: BytesMut,
    ) -> Self {
        let mut capsules = CapsuleReader::default();
        capsules.push(&frames);
        let mut stream = Self {
            send,
            recv,
            outbox,
            capsules,
        };
        let mut outbox = std::mem::take(&mut stream.outbox);
        stream.send.try_write(&mut outbox, false);
        stream.outbox = outbox;
        stream
    }

    /// Writes a CLOSE_WEBTRANSPORT_SESSION capsule in a DATA frame, then the FIN.
    pub(super) fn send_close(&mut self, code: u32, reason: &str) {
        let mut capsule = BytesMut::new();
        Capsule::CloseWebTransportSession {
            code,
            // The capsule's reason is bounded (1024 bytes in the draft).
            reason: truncate(reason, 1024).to_owned(),
        }
        .encode(&mut capsule);
        let mut frame = BytesMut::with_capacity(capsule.len() + 16);
        Frame::DATA.encode(&mut frame);
        varint(capsule.len() as u64).encode(&mut frame);
        frame.put_slice(&capsule);
        // Anything of the response still unwritten goes first.
        let mut all = BytesMut::from(&std::mem::take(&mut self.outbox)[..]);
        all.put_slice(&frame);
        self.send.try_write(&mut all.freeze(), true);
    }

    /// Writes the outbox, then reads: ready with the peer's close (code and reason) when
    /// a CLOSE_WEBTRANSPORT_SESSION capsule or the FIN arrives, or with why the stream is
    /// malformed.
    pub(super) fn poll(&mut self, waiter: &Waiter) -> Poll<Result<(u32, String), String>> {
        if !self.outbox.is_empty() {
            let _ = self.send.poll_write(waiter, &mut self.outbox);
        }
        loop {
            if let Some(result) = self.capsules.close()? {
                return Poll::Ready(Ok(result));
            }
            match self.recv.poll_read(waiter) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(Some(chunk))) => self.capsules.push(&chunk),
                // The FIN without a capsule: closed with code 0.
                Poll::Ready(Ok(None)) => return Poll::Ready(Ok((0, String::new()))),
                // The connection's own close reports this.
                Poll::Ready(Err(StreamError::Connection(_))) => return Poll::Pending,
                Poll::Ready(Err(error)) => {
                    return Poll::Ready(Ok((0, format!("the CONNECT stream ended: {error}"))));
                }
            }
        }
    }
}

pub(super) fn varint(value: u64) -> VarInt {
    VarInt::try_from(value).unwrap_or(VarInt::MAX)
}

fn truncate(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
