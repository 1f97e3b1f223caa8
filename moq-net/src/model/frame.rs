//! Frames: a payload with a timestamp, written whole or in chunks.
//!
//! Most frames are written whole ([`GroupProducer::write_frame`](super::GroupProducer::write_frame)):
//! the payload is one [`Bytes`] shared by every reader, never copied. A large frame whose size
//! is known up front can instead be streamed with a [`FrameProducer`]: readers receive its
//! chunks as they are written, so a relay forwards a 1 MB frame without buffering it whole.

use moqx_kio::sync::Arc;
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use moqx_kio::Waiter;
use moqx_kio::log::{LogReader, LogWriter, Next, Start};

use super::status::Status;
use crate::Error;

/// A complete frame: its timestamp, in the track's timescale, and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Presentation timestamp in the track's timescale (spec: moq-lite-05, FRAME).
    pub timestamp: u64,
    /// The payload, shared (not copied) by every reader.
    pub payload: Bytes,
}

/// Writes one frame in chunks. The declared size is a promise: writing more, or finishing
/// with less, aborts the frame with [`Error::WrongSize`]. Dropping it unfinished aborts the
/// frame with [`Error::Dropped`].
#[derive(Debug)]
pub struct FrameProducer {
    chunks: Option<LogWriter<Bytes>>,
    remaining: u64,
    status: Arc<Status>,
}

/// Reads one frame, whole or chunk by chunk.
#[derive(Debug)]
pub struct FrameConsumer {
    timestamp: u64,
    size: u64,
    body: ConsumerBody,
}

/// A frame as stored in a group: its header and a way to reach its bytes.
#[derive(Debug, Clone)]
pub(crate) struct FrameEntry {
    pub(crate) timestamp: u64,
    pub(crate) size: u64,
    body: EntryBody,
}

#[derive(Debug, Clone)]
enum EntryBody {
    Whole(Bytes),
    /// A reader at the first chunk, cloned for each consumer; and the frame's outcome.
    Chunked(LogReader<Bytes>, Arc<Status>),
}

#[derive(Debug)]
enum ConsumerBody {
    Whole(Option<Bytes>),
    Chunked {
        chunks: LogReader<Bytes>,
        status: Arc<Status>,
        /// Chunks gathered by `poll_read_all` so far.
        gathered: Option<BytesMut>,
    },
}

impl FrameEntry {
    pub(crate) fn whole(frame: Frame) -> Self {
        Self {
            timestamp: frame.timestamp,
            size: frame.payload.len() as u64,
            body: EntryBody::Whole(frame.payload),
        }
    }

    /// A chunked frame of `size` bytes, and the producer that writes it.
    pub(crate) fn chunked(timestamp: u64, size: u64) -> (Self, FrameProducer) {
        let chunks = LogWriter::new();
        let status = Arc::new(Status::default());
        let entry = Self {
            timestamp,
            size,
            body: EntryBody::Chunked(chunks.reader(Start::Oldest), status.clone()),
        };
        let producer = FrameProducer {
            chunks: Some(chunks),
            remaining: size,
            status,
        };
        (entry, producer)
    }

    /// The frame itself, if it was written whole.
    pub(crate) fn whole_frame(&self) -> Option<Frame> {
        match &self.body {
            EntryBody::Whole(payload) => Some(Frame {
                timestamp: self.timestamp,
                payload: payload.clone(),
            }),
            EntryBody::Chunked(..) => None,
        }
    }

    pub(crate) fn consume(&self) -> FrameConsumer {
        let body = match &self.body {
            EntryBody::Whole(payload) => ConsumerBody::Whole(Some(payload.clone())),
            EntryBody::Chunked(chunks, status) => ConsumerBody::Chunked {
                chunks: chunks.clone(),
                status: status.clone(),
                gathered: None,
            },
        };
        FrameConsumer {
            timestamp: self.timestamp,
            size: self.size,
            body,
        }
    }
}

impl FrameProducer {
    /// Bytes still to write before [`finish`](Self::finish).
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Appends a chunk. More bytes than declared aborts the frame with `WrongSize`.
    pub fn write(&mut self, chunk: impl Into<Bytes>) -> Result<(), Error> {
        let chunk = chunk.into();
        let Some(chunks) = self.chunks.as_mut() else {
            return Err(Error::Closed);
        };
        if chunk.len() as u64 > self.remaining {
            self.close(Err(Error::WrongSize));
            return Err(Error::WrongSize);
        }
        self.remaining -= chunk.len() as u64;
        if !chunk.is_empty() {
            chunks.append(chunk);
        }
        Ok(())
    }

    /// Completes the frame. Fewer bytes than declared aborts it with `WrongSize`.
    pub fn finish(mut self) -> Result<(), Error> {
        if self.remaining != 0 {
            self.close(Err(Error::WrongSize));
            return Err(Error::WrongSize);
        }
        self.close(Ok(()));
        Ok(())
    }

    /// Aborts the frame: readers see `error`.
    pub fn abort(mut self, error: Error) {
        self.close(Err(error));
    }

    fn close(&mut self, outcome: Result<(), Error>) {
        // The status is published before the chunk log closes, so a reader that sees the
        // close sees the outcome.
        self.status.set(outcome);
        self.chunks = None;
    }
}

impl Drop for FrameProducer {
    fn drop(&mut self) {
        if self.chunks.is_some() {
            self.close(Err(Error::Dropped));
        }
    }
}

impl FrameConsumer {
    /// The frame's timestamp, in the track's timescale.
    pub fn timestamp(&self) -> u64 {
        self.timestamp
    }

    /// The frame's declared size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The next chunk: `Ready(Ok(Some(chunk)))`, `Ready(Ok(None))` once every byte was
    /// returned, or the error the frame was aborted with. A whole frame is one chunk.
    pub fn poll_chunk(&mut self, waiter: &Waiter) -> Poll<Result<Option<Bytes>, Error>> {
        match &mut self.body {
            ConsumerBody::Whole(payload) => Poll::Ready(Ok(payload.take())),
            ConsumerBody::Chunked { chunks, status, .. } => match chunks.poll_next(waiter) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Next::Item(chunk)) => Poll::Ready(Ok(Some(chunk.clone()))),
                // A frame's chunk log retains everything, so it never lags.
                Poll::Ready(Next::Lagged(_)) => Poll::Ready(Err(Error::Lagged)),
                Poll::Ready(Next::Closed) => match status.get() {
                    Some(Ok(())) => Poll::Ready(Ok(None)),
                    Some(Err(error)) => Poll::Ready(Err(error)),
                    None => Poll::Ready(Err(Error::Dropped)),
                },
            },
        }
    }

    /// The whole payload. For a chunked frame, the chunks are gathered into one buffer (the
    /// only copy); a whole frame is returned as stored, without copying.
    pub fn poll_read_all(&mut self, waiter: &Waiter) -> Poll<Result<Bytes, Error>> {
        if let ConsumerBody::Whole(payload) = &mut self.body {
            return Poll::Ready(payload.take().ok_or(Error::Closed));
        }
        loop {
            let chunk = match self.poll_chunk(waiter) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(result) => result?,
            };
            let ConsumerBody::Chunked { gathered, .. } = &mut self.body else {
                unreachable!("whole frames returned above");
            };
            // The declared size may come from a peer: reserve at most 64 KiB up front and let
            // the buffer grow with the bytes that actually arrive.
            let reserve = self.size.min(64 * 1024) as usize;
            let buffer = gathered.get_or_insert_with(|| BytesMut::with_capacity(reserve));
            match chunk {
                Some(chunk) => buffer.extend_from_slice(&chunk),
                None => return Poll::Ready(Ok(std::mem::take(buffer).freeze())),
            }
        }
    }

    /// Waits for the next chunk.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, Error> {
        moqx_kio::wait(|waiter| self.poll_chunk(waiter)).await
    }

    /// Waits for the whole payload.
    pub async fn read_all(&mut self) -> Result<Bytes, Error> {
        moqx_kio::wait(|waiter| self.poll_read_all(waiter)).await
    }
}
