//! What a connection keeps per stream: the send half's queue and credit, the receive
//! half's chunks and credit, and the tasks parked on each.

use std::collections::VecDeque;

use bytes::Bytes;
use moqx_kio::WaiterSlot;
use moqx_net::transport::StreamPriority;

/// Which side opened a stream, and its direction: the two low bits of its ID
/// (RFC 9000 §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamKind {
    /// The server opened it (else the client).
    pub(crate) server: bool,
    /// One direction only.
    pub(crate) uni: bool,
}

impl StreamKind {
    pub(crate) fn of(id: u64) -> Self {
        Self {
            server: id & 1 == 1,
            uni: id & 2 == 2,
        }
    }

    /// The ID of the `index`th stream of this kind.
    pub(crate) fn id(self, index: u64) -> u64 {
        index << 2 | u64::from(self.uni) << 1 | u64::from(self.server)
    }
}

/// Where a stream waits to send: a key in the connection's ordered set of streams with
/// something to send. Streams without a priority (control streams) go ahead of every
/// prioritized one; a greater priority goes first; equals take turns in the order they
/// queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SendKey {
    /// 0 for a stream without a priority, 1 with one.
    pub(crate) tier: u8,
    pub(crate) priority: std::cmp::Reverse<StreamPriority>,
    pub(crate) turn: u64,
    pub(crate) id: u64,
}

/// One stream.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    /// `None` for a stream the peer opened one way.
    pub(crate) send: Option<SendHalf>,
    /// `None` for a stream this side opened one way.
    pub(crate) recv: Option<RecvHalf>,
    pub(crate) priority: Option<StreamPriority>,
    /// Its place in the send order, while it has one.
    pub(crate) key: Option<SendKey>,
}

/// The sending half.
#[derive(Debug, Default)]
pub(crate) struct SendHalf {
    /// Bytes written and not yet framed.
    pub(crate) queue: VecDeque<Bytes>,
    pub(crate) queued: usize,
    /// Bytes framed so far: the offset of the next.
    pub(crate) offset: u64,
    /// The peer's limit on the stream (MAX_STREAM_DATA).
    pub(crate) max: u64,
    /// The limit a STREAM_DATA_BLOCKED was sent at.
    pub(crate) blocked_at: Option<u64>,
    /// The application ended the stream: a FIN goes after the queue.
    pub(crate) finishing: bool,
    /// The FIN or a RESET_STREAM went: nothing more goes.
    pub(crate) done: bool,
    /// The peer's STOP_SENDING code.
    pub(crate) stopped: Option<u64>,
    /// No handle is left.
    pub(crate) released: bool,
    pub(crate) writer: WaiterSlot,
    pub(crate) stop_watcher: WaiterSlot,
}

/// The receiving half.
#[derive(Debug, Default)]
pub(crate) struct RecvHalf {
    pub(crate) chunks: VecDeque<Bytes>,
    /// Bytes received: the offset the next STREAM frame must start at.
    pub(crate) offset: u64,
    /// Bytes the application read (or this side discarded).
    pub(crate) read: u64,
    /// The limit given to the peer (MAX_STREAM_DATA).
    pub(crate) max: u64,
    /// The FIN arrived: `offset` is the final size.
    pub(crate) fin: bool,
    /// The peer reset the stream with this code.
    pub(crate) reset: Option<u64>,
    /// The application read the end (or the reset), or gave the stream up.
    pub(crate) done: bool,
    /// No handle is left: what arrives is discarded.
    pub(crate) released: bool,
    pub(crate) reader: WaiterSlot,
}

impl SendHalf {
    /// Whether it has something to frame: bytes, or a FIN after them.
    pub(crate) fn has_output(&self) -> bool {
        !self.done && (self.queued > 0 || self.finishing)
    }

    /// Whether it needs nothing more of the connection.
    pub(crate) fn finished(&self) -> bool {
        self.done && self.released
    }
}

impl RecvHalf {
    /// Whether it needs nothing more of the connection: the application is done with it
    /// and the peer said its final size.
    pub(crate) fn finished(&self) -> bool {
        (self.done || self.released) && (self.fin || self.reset.is_some())
    }
}

impl Stream {
    pub(crate) fn finished(&self) -> bool {
        self.send.as_ref().is_none_or(SendHalf::finished)
            && self.recv.as_ref().is_none_or(RecvHalf::finished)
    }
}
