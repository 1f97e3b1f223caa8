//! What carries a QMux connection's records: a byte stream (TCP; records with their Size)
//! or a WebSocket (one record per binary message). Both in the poll shape the driver
//! wants: what arrived, room to send, flush, shut down.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use futures_util::{Sink, Stream};
use moqx_qmux::record::{RecordReader, frame_record};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

/// Something the carrier delivered.
#[derive(Debug)]
pub(crate) enum Arrived {
    /// A record's frames.
    Record(Bytes),
    /// A sign of life below QMux (a WebSocket Ping or Pong).
    Activity,
    /// The peer ended its side (a FIN, a WebSocket Close).
    End,
    /// The peer's framing is broken (a record over the limit, a WebSocket text message):
    /// what is wrong.
    Malformed(String),
}

/// A carrier of records.
pub(crate) trait Carrier: Unpin {
    /// The next thing that arrived; `Err` with what went wrong when the carrier failed or
    /// the peer broke its framing.
    fn poll_arrived(&mut self, cx: &mut Context<'_>) -> Poll<Result<Arrived, String>>;

    /// `Ready` when [`send`](Self::send) may be called.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>>;

    /// Queues a record's frames.
    fn send(&mut self, record: Bytes) -> Result<(), String>;

    /// Queues a keep-alive below QMux, if the carrier has one (a WebSocket Ping).
    fn send_keep_alive(&mut self) -> Result<(), String> {
        Ok(())
    }

    /// Writes what is queued.
    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>>;

    /// Ends this side once what is queued is written.
    fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>>;
}

/// A byte stream: records framed with their Size (draft-00: bare frames).
pub(crate) struct ByteStream<S> {
    io: S,
    reader: RecordReader,
    records: bool,
    out: BytesMut,
    read_buffer: Box<[u8]>,
}

/// Queued bytes past which the carrier takes no more until they are written.
const OUT_HIGH_WATER: usize = 256 * 1024;

impl<S> ByteStream<S> {
    /// Records of at most `limit` bytes each way in (`records`: draft-01 and later).
    pub(crate) fn new(io: S, records: bool, limit: u64) -> Self {
        Self {
            io,
            reader: RecordReader::new(records, limit),
            records,
            out: BytesMut::new(),
            read_buffer: vec![0u8; super::READ_BUFFER].into_boxed_slice(),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Carrier for ByteStream<S> {
    fn poll_arrived(&mut self, cx: &mut Context<'_>) -> Poll<Result<Arrived, String>> {
        loop {
            match self.reader.next_record() {
                Ok(Some(record)) => return Poll::Ready(Ok(Arrived::Record(record))),
                Ok(None) => {}
                Err(error) => return Poll::Ready(Ok(Arrived::Malformed(error.to_string()))),
            }
            let mut buf = ReadBuf::new(&mut self.read_buffer);
            ready!(Pin::new(&mut self.io).poll_read(cx, &mut buf)).map_err(|e| e.to_string())?;
            if buf.filled().is_empty() {
                return Poll::Ready(Ok(Arrived::End));
            }
            self.reader.buffer().extend_from_slice(buf.filled());
        }
    }

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        if self.out.len() < OUT_HIGH_WATER {
            return Poll::Ready(Ok(()));
        }
        self.poll_flush(cx)
    }

    fn send(&mut self, record: Bytes) -> Result<(), String> {
        frame_record(&record, self.records, &mut self.out);
        Ok(())
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        while !self.out.is_empty() {
            let written = ready!(Pin::new(&mut self.io).poll_write(cx, &self.out))
                .map_err(|e| e.to_string())?;
            if written == 0 {
                return Poll::Ready(Err("the connection took no more bytes".to_owned()));
            }
            let _ = self.out.split_to(written);
        }
        Pin::new(&mut self.io)
            .poll_flush(cx)
            .map_err(|e| e.to_string())
    }

    fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        ready!(self.poll_flush(cx))?;
        Pin::new(&mut self.io)
            .poll_shutdown(cx)
            .map_err(|e| e.to_string())
    }
}

/// A WebSocket: each binary message is one record's frames (draft-lcurley-qmux-websocket).
pub(crate) struct WebSocket<S> {
    socket: WebSocketStream<S>,
}

impl<S> WebSocket<S> {
    pub(crate) fn new(socket: WebSocketStream<S>) -> Self {
        Self { socket }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Carrier for WebSocket<S> {
    fn poll_arrived(&mut self, cx: &mut Context<'_>) -> Poll<Result<Arrived, String>> {
        loop {
            let message = match ready!(Pin::new(&mut self.socket).poll_next(cx)) {
                None => return Poll::Ready(Ok(Arrived::End)),
                Some(Err(error)) => return Poll::Ready(Err(format!("WebSocket: {error}"))),
                Some(Ok(message)) => message,
            };
            return Poll::Ready(Ok(match message {
                Message::Binary(record) => Arrived::Record(record),
                // A Ping is answered by tungstenite at the next flush.
                Message::Ping(_) | Message::Pong(_) => Arrived::Activity,
                Message::Close(_) => Arrived::End,
                Message::Text(_) => Arrived::Malformed(
                    "a text message (QMux over WebSocket allows binary ones only)".to_owned(),
                ),
                Message::Frame(_) => continue,
            }));
        }
    }

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        Pin::new(&mut self.socket)
            .poll_ready(cx)
            .map_err(|e| format!("WebSocket: {e}"))
    }

    fn send(&mut self, record: Bytes) -> Result<(), String> {
        Pin::new(&mut self.socket)
            .start_send(Message::Binary(record))
            .map_err(|e| format!("WebSocket: {e}"))
    }

    fn send_keep_alive(&mut self) -> Result<(), String> {
        Pin::new(&mut self.socket)
            .start_send(Message::Ping(Bytes::new()))
            .map_err(|e| format!("WebSocket: {e}"))
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        Pin::new(&mut self.socket)
            .poll_flush(cx)
            .map_err(|e| format!("WebSocket: {e}"))
    }

    fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        Pin::new(&mut self.socket)
            .poll_close(cx)
            .map_err(|e| format!("WebSocket: {e}"))
    }
}
