//! Reading messages from a stream and writing them to one.
//!
//! [`Reader`] buffers what a stream delivers until a whole message decodes
//! ([`DecodeError::Short`] means "read more"); [`Writer`] queues encoded bytes and writes
//! them as the stream accepts them.

use std::collections::VecDeque;
use std::task::Poll;

use bytes::{Buf, Bytes, BytesMut};
use moqx_kio::Waiter;

use crate::Error;
use crate::coding::DecodeError;
use crate::transport::{RecvStream, SendStream, StreamError};

impl From<StreamError> for Error {
    /// A stream failure as the session sees it: the peer's code, or the connection's loss.
    fn from(error: StreamError) -> Self {
        match error {
            StreamError::Reset(code) | StreamError::Stopped(code) => Error::from_code(code),
            StreamError::Connection(_) => Error::Transport,
        }
    }
}

/// Why reading a message failed, which decides what fails with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// The peer sent bytes that do not decode: a protocol error, fatal to the session.
    Malformed(Error),
    /// The stream was reset or stopped, or the connection went away: only this stream
    /// ends, with the peer's code.
    Stream(Error),
}

impl ReadError {
    /// The sub-machine's result: a malformed message closes the session; a stream failure
    /// ends only the sub-machine.
    pub(crate) fn outcome(self) -> Result<(), Error> {
        match self {
            ReadError::Malformed(error) => Err(error),
            ReadError::Stream(_) => Ok(()),
        }
    }

    /// The error either way.
    pub(crate) fn error(self) -> Error {
        match self {
            ReadError::Malformed(error) | ReadError::Stream(error) => error,
        }
    }
}

/// Buffers a receive stream and decodes messages from it, holding at most about `limit`
/// bytes of a message that has not arrived whole (plus one read's chunk).
pub(crate) struct Reader<S> {
    stream: S,
    buffer: BytesMut,
    fin: bool,
    limit: usize,
}

impl<S: RecvStream> Reader<S> {
    /// A reader of `stream` refusing any message of `limit` bytes or more
    /// ([`SessionLimits::max_message_bytes`](super::SessionLimits::max_message_bytes)).
    pub(crate) fn new(stream: S, limit: usize) -> Self {
        Self {
            stream,
            buffer: BytesMut::new(),
            fin: false,
            limit,
        }
    }

    /// The next message, decoded by `decode` from the buffered bytes; `Ok(None)` at a clean
    /// end of stream (FIN with nothing buffered). Bytes cut off by FIN are a decode error.
    pub(crate) fn poll_message<M>(
        &mut self,
        waiter: &Waiter,
        decode: impl Fn(&mut &[u8]) -> Result<M, DecodeError>,
    ) -> Poll<Result<Option<M>, ReadError>> {
        loop {
            if !self.buffer.is_empty() {
                let mut cursor = &self.buffer[..];
                match decode(&mut cursor) {
                    Ok(message) => {
                        let used = self.buffer.len() - cursor.len();
                        self.buffer.advance(used);
                        return Poll::Ready(Ok(Some(message)));
                    }
                    // Whatever the length prefix claims, the bytes held for one message
                    // stay under the limit: a message still incomplete at it is refused.
                    Err(DecodeError::Short) if !self.fin && self.buffer.len() >= self.limit => {
                        tracing::debug!(
                            message = message_name::<M>(),
                            limit = self.limit,
                            "a message over the size limit from the peer"
                        );
                        return Poll::Ready(Err(ReadError::Malformed(Error::BoundsExceeded)));
                    }
                    Err(DecodeError::Short) if !self.fin => {}
                    Err(error) => {
                        tracing::debug!(
                            message = message_name::<M>(),
                            %error,
                            "a malformed message from the peer"
                        );
                        return Poll::Ready(Err(ReadError::Malformed(error.into())));
                    }
                }
            } else if self.fin {
                return Poll::Ready(Ok(None));
            }
            match self.poll_fill(waiter) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(error)) => return Poll::Ready(Err(ReadError::Stream(error))),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Changes the size limit of a message (a control stream's, once its SETUP was read).
    pub(crate) fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    /// Reads one more chunk into the buffer (or notes FIN).
    pub(crate) fn poll_fill(&mut self, waiter: &Waiter) -> Poll<Result<(), Error>> {
        match self.stream.poll_read(waiter) {
            Poll::Ready(Ok(Some(chunk))) => {
                self.buffer.extend_from_slice(&chunk);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Ok(None)) => {
                self.fin = true;
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error.into())),
            Poll::Pending => Poll::Pending,
        }
    }

    /// The stream and whatever was buffered past the last message.
    pub(crate) fn into_parts(self) -> (S, BytesMut) {
        (self.stream, self.buffer)
    }

    /// Takes the buffered bytes out, discarding them from the reader.
    pub(crate) fn take_buffer(&mut self) -> BytesMut {
        std::mem::take(&mut self.buffer)
    }

    /// Whether the stream ended.
    pub(crate) fn is_finished(&self) -> bool {
        self.fin
    }

    /// The stream itself.
    pub(crate) fn stream_mut(&mut self) -> &mut S {
        &mut self.stream
    }
}

/// Queues bytes for a send stream and writes them as it accepts them.
pub(crate) struct Writer<S> {
    stream: S,
    queue: VecDeque<Bytes>,
}

impl<S: SendStream> Writer<S> {
    pub(crate) fn new(stream: S) -> Self {
        Self {
            stream,
            queue: VecDeque::new(),
        }
    }

    /// Queues `bytes` behind what is already queued.
    pub(crate) fn queue(&mut self, bytes: impl Into<Bytes>) {
        let bytes = bytes.into();
        if !bytes.is_empty() {
            self.queue.push_back(bytes);
        }
    }

    /// How many chunks are queued and not yet accepted by the stream.
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Writes everything queued; `Ready(Ok(()))` once the stream accepted all of it.
    pub(crate) fn poll_flush(&mut self, waiter: &Waiter) -> Poll<Result<(), Error>> {
        while let Some(front) = self.queue.front_mut() {
            match self.stream.poll_write(waiter, front) {
                Poll::Ready(Ok(())) => {
                    self.queue.pop_front();
                }
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error.into())),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Writes everything queued, then ends the stream (FIN). A stream the peer already
    /// reset or stopped counts as finished: there is nothing left to do with it.
    ///
    /// The last queued chunk goes out with the FIN in one write
    /// ([`SendStream::poll_write_final`]), so the FIN rides with the last bytes.
    pub(crate) fn poll_finish(&mut self, waiter: &Waiter) -> Poll<()> {
        loop {
            let last = self.queue.len() <= 1;
            let result = match self.queue.front_mut() {
                Some(front) if last => self.stream.poll_write_final(waiter, front),
                Some(front) => self.stream.poll_write(waiter, front),
                None => {
                    // Nothing queued: a FIN of its own.
                    let _ = self.stream.finish();
                    return Poll::Ready(());
                }
            };
            match result {
                Poll::Ready(Ok(())) => {
                    self.queue.pop_front();
                    if last {
                        return Poll::Ready(());
                    }
                }
                Poll::Ready(Err(_)) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// The stream itself.
    pub(crate) fn stream_mut(&mut self) -> &mut S {
        &mut self.stream
    }
}

/// A message type's name for the log: `AnnounceOk` for `moqx_net::coding::AnnounceOk`.
fn message_name<M>() -> &'static str {
    let name = std::any::type_name::<M>();
    name.rsplit("::").next().unwrap_or(name)
}

/// Encodes a message into fresh bytes.
pub(crate) fn encoded(
    encode: impl FnOnce(&mut Vec<u8>) -> Result<(), crate::coding::EncodeError>,
) -> Result<Bytes, Error> {
    let mut buf = Vec::with_capacity(64);
    encode(&mut buf)?;
    Ok(Bytes::from(buf))
}
