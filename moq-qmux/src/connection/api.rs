//! The stream operations a session's handles call, in `moqx_net::transport`'s poll shape:
//! on `Pending` the caller's [`Waiter`] is parked and woken when the answer may change.

use std::task::Poll;

use bytes::Bytes;
use moqx_kio::Waiter;
use moqx_net::transport::{StreamError, StreamPriority, TransportError};

use super::Connection;
use super::stream::{RecvHalf, SendHalf, Stream};
use crate::frame::Frame;

impl Connection {
    /// Opens a stream (`uni`: one way); `Pending` until the peer's parameters came and
    /// while its stream limit is reached.
    pub fn poll_open(&mut self, uni: bool, waiter: &Waiter) -> Poll<Result<u64, TransportError>> {
        if let Some(error) = &self.closed {
            return Poll::Ready(Err(error.clone()));
        }
        let Some(peer) = &self.peer else {
            self.openers.register(waiter);
            return Poll::Pending;
        };
        let max = match uni {
            true => peer.initial_max_stream_data_uni,
            false => peer.initial_max_stream_data_bidi_remote,
        };
        let stream_window = self.config.stream_window;
        let counts = self.counts(uni);
        if counts.opened >= counts.peer_max {
            if counts.blocked_at != Some(counts.peer_max) {
                counts.blocked_at = Some(counts.peer_max);
                let limit = counts.peer_max;
                self.queue_control(Frame::StreamsBlocked { bidi: !uni, limit });
            }
            self.openers.register(waiter);
            return Poll::Pending;
        }
        let index = counts.opened;
        counts.opened += 1;
        let id = self.local_kind(uni).id(index);
        let stream = Stream {
            send: Some(SendHalf {
                max,
                ..SendHalf::default()
            }),
            recv: (!uni).then(|| RecvHalf {
                max: stream_window,
                ..RecvHalf::default()
            }),
            ..Stream::default()
        };
        self.streams.insert(id, stream);
        Poll::Ready(Ok(id))
    }

    /// The next stream the peer opened (`uni`: one way).
    pub fn poll_accept(&mut self, uni: bool, waiter: &Waiter) -> Poll<Result<u64, TransportError>> {
        let incoming = match uni {
            true => &mut self.incoming_uni,
            false => &mut self.incoming_bidi,
        };
        if let Some(id) = incoming.pop_front() {
            return Poll::Ready(Ok(id));
        }
        if let Some(error) = &self.closed {
            return Poll::Ready(Err(error.clone()));
        }
        self.acceptors.register(waiter);
        Poll::Pending
    }

    /// Queues what of `data` the stream's credit and the send buffer take, advancing
    /// `data` past it; `Ready(Ok(()))` once all of it is queued (and, with `fin`, the FIN
    /// behind it).
    pub fn poll_write(
        &mut self,
        id: u64,
        waiter: &Waiter,
        data: &mut Bytes,
        fin: bool,
    ) -> Poll<Result<(), StreamError>> {
        if let Err(error) = self.queue(id, data, fin) {
            return Poll::Ready(Err(error));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(()));
        }
        if let Some(send) = self
            .streams
            .get_mut(&id)
            .and_then(|stream| stream.send.as_mut())
        {
            send.writer.register(waiter);
        }
        if !self.waiting_writers.contains(&id) {
            self.waiting_writers.push(id);
        }
        Poll::Pending
    }

    /// Ends the stream after what was written (FIN).
    pub fn finish(&mut self, id: u64) -> Result<(), StreamError> {
        self.queue(id, &mut Bytes::new(), true)
    }

    /// Queues what of `data` the stream's credit and the send buffer take (splitting it
    /// off `data`), and the FIN once all of it is queued, if `fin`.
    fn queue(&mut self, id: u64, data: &mut Bytes, fin: bool) -> Result<(), StreamError> {
        if let Some(error) = &self.closed {
            return Err(error.clone().into());
        }
        let buffer_room = self.config.send_buffer.saturating_sub(self.buffered);
        let Some(send) = self
            .streams
            .get_mut(&id)
            .and_then(|stream| stream.send.as_mut())
        else {
            return Err(StreamError::Stopped(0));
        };
        if let Some(code) = send.stopped {
            return Err(StreamError::Stopped(code));
        }
        if send.done || send.finishing {
            return Err(StreamError::Stopped(0));
        }
        let credit = send.max.saturating_sub(send.offset + send.queued as u64);
        let take = (data.len() as u64).min(credit).min(buffer_room as u64) as usize;
        if take > 0 {
            send.queue.push_back(data.split_to(take));
            send.queued += take;
            self.buffered += take;
        }
        if data.is_empty() {
            send.finishing = fin;
        }
        self.schedule(id);
        Ok(())
    }

    /// Abandons the stream's sending half with `code` (RESET_STREAM); what was queued is
    /// dropped.
    pub fn reset(&mut self, id: u64, code: u64) {
        self.reset_send(id, code);
    }

    pub(super) fn reset_send(&mut self, id: u64, code: u64) {
        if self.closed.is_some() {
            return;
        }
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let Some(send) = stream.send.as_mut() else {
            return;
        };
        if send.done {
            return;
        }
        send.done = true;
        send.queue.clear();
        self.buffered -= std::mem::take(&mut send.queued);
        self.wakers.extend(send.writer.take());
        let final_size = send.offset;
        if let Some(key) = stream.key.take() {
            self.sendable.remove(&key);
        }
        self.connection_blocked.retain(|&blocked| blocked != id);
        self.queue_control(Frame::ResetStream {
            id,
            code,
            final_size,
        });
        self.forget_if_finished(id);
    }

    /// Sets the stream's place in the send order.
    pub fn set_priority(&mut self, id: u64, priority: StreamPriority) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        stream.priority = Some(priority);
        if let Some(key) = stream.key.take() {
            self.sendable.remove(&key);
            self.schedule(id);
        }
    }

    /// Ready with the peer's STOP_SENDING code.
    pub fn poll_stopped(&mut self, id: u64, waiter: &Waiter) -> Poll<Result<u64, StreamError>> {
        if let Some(error) = &self.closed {
            return Poll::Ready(Err(error.clone().into()));
        }
        let Some(send) = self
            .streams
            .get_mut(&id)
            .and_then(|stream| stream.send.as_mut())
        else {
            return Poll::Pending;
        };
        match send.stopped {
            Some(code) => Poll::Ready(Ok(code)),
            None => {
                send.stop_watcher.register(waiter);
                Poll::Pending
            }
        }
    }

    /// The next chunk of the stream; `Ok(None)` at its end.
    pub fn poll_read(
        &mut self,
        id: u64,
        waiter: &Waiter,
    ) -> Poll<Result<Option<Bytes>, StreamError>> {
        let stream_window = self.config.stream_window;
        let closed = self.closed.clone();
        let Some(recv) = self
            .streams
            .get_mut(&id)
            .and_then(|stream| stream.recv.as_mut())
        else {
            return Poll::Ready(Ok(None));
        };
        if let Some(chunk) = recv.chunks.pop_front() {
            let len = chunk.len() as u64;
            recv.read += len;
            // Half the window read: the peer gets a new limit.
            let raise = !recv.fin && recv.max - recv.read < stream_window / 2;
            if raise {
                recv.max = recv.read + stream_window;
            }
            let max = recv.max;
            if raise && closed.is_none() {
                self.queue_control(Frame::MaxStreamData { id, max });
            }
            if closed.is_none() {
                self.consumed(len);
            }
            return Poll::Ready(Ok(Some(chunk)));
        }
        if let Some(code) = recv.reset {
            recv.done = true;
            self.forget_if_finished(id);
            return Poll::Ready(Err(StreamError::Reset(code)));
        }
        if recv.fin {
            recv.done = true;
            self.forget_if_finished(id);
            return Poll::Ready(Ok(None));
        }
        if let Some(error) = closed {
            return Poll::Ready(Err(error.into()));
        }
        recv.reader.register(waiter);
        Poll::Pending
    }

    /// Whether the stream's end is all that is left to read.
    pub fn at_end(&self, id: u64) -> bool {
        self.streams
            .get(&id)
            .and_then(|stream| stream.recv.as_ref())
            .is_some_and(|recv| recv.fin && recv.chunks.is_empty())
    }

    /// Gives the stream's receiving half up: STOP_SENDING with `code` unless its end
    /// already came; what arrives from now on is discarded.
    pub fn stop(&mut self, id: u64, code: u64) {
        let Some(recv) = self
            .streams
            .get_mut(&id)
            .and_then(|stream| stream.recv.as_mut())
        else {
            return;
        };
        if recv.done {
            return;
        }
        recv.done = true;
        let unread = recv.offset - recv.read;
        recv.read = recv.offset;
        recv.chunks.clear();
        let send_stop = !recv.fin && recv.reset.is_none();
        if self.closed.is_none() {
            self.consumed(unread);
            if send_stop {
                self.queue_control(Frame::StopSending { id, code });
            }
        }
        self.forget_if_finished(id);
    }

    /// The sending half's handle is gone: a stream not ended is reset with code 0; one
    /// finished goes on sending what it queued.
    pub fn release_send(&mut self, id: u64) {
        let Some(send) = self
            .streams
            .get_mut(&id)
            .and_then(|stream| stream.send.as_mut())
        else {
            return;
        };
        send.released = true;
        if !send.done && !send.finishing {
            self.reset_send(id, 0);
        }
        self.forget_if_finished(id);
    }

    /// The receiving half's handle is gone: a stream not read to its end is stopped with
    /// code 0.
    pub fn release_recv(&mut self, id: u64) {
        let Some(recv) = self
            .streams
            .get_mut(&id)
            .and_then(|stream| stream.recv.as_mut())
        else {
            return;
        };
        recv.released = true;
        self.stop(id, 0);
        self.forget_if_finished(id);
    }

    /// Ready with the peer's transport parameters once they arrived (the connection is
    /// established), or with why the connection is gone first.
    pub fn poll_parameters(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<crate::TransportParameters, TransportError>> {
        if let Some(peer) = &self.peer {
            return Poll::Ready(Ok(peer.clone()));
        }
        if let Some(error) = &self.closed {
            return Poll::Ready(Err(error.clone()));
        }
        self.openers.register(waiter);
        Poll::Pending
    }

    /// Ready with the reason once the connection is gone.
    pub fn poll_closed(&mut self, waiter: &Waiter) -> Poll<TransportError> {
        if let Some(error) = &self.closed {
            return Poll::Ready(error.clone());
        }
        self.closers.register(waiter);
        Poll::Pending
    }
}
