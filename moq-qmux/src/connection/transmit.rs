//! The send path: one record at a time, control frames first, then stream data in the
//! streams' order, within the peer's record size and credit.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::Connection;
use crate::frame::{Frame, encode_stream_header, stream_data_room};

/// Less room than this left in a record is not worth a stream's frame header.
const LEAST_ROOM: usize = 16;

/// The largest record this side sends, whatever the peer takes: bounds the buffer a
/// record is built in.
const MOST_RECORD: usize = 64 * 1024;

impl Connection {
    /// The next record's frames to send, `None` when there is nothing to send. A byte
    /// stream carrier frames it ([`crate::record::frame_record`]); a WebSocket sends it as
    /// one message. After the CONNECTION_CLOSE (or a close that sends none) it returns
    /// `None` for good, and the carrier is shut down.
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        self.driver_woken = false;
        let room = self.record_room();
        let mut record = BytesMut::new();
        if let Some(parameters) = self.parameters.take() {
            parameters.encode(&mut record);
            if !self.version.has_records() {
                return Some(self.sent(record));
            }
        }
        if self.closed.is_some() {
            if let Some(close) = self.close_frame.take() {
                close.encode(&mut record);
            }
            return (!record.is_empty()).then(|| self.sent(record));
        }
        if let Some(sequence) = self.pong_owed.take() {
            self.control.push_front(Frame::PingResponse(sequence));
        }
        // Nothing but the parameters may go before the peer's arrive (spec: -02 §4.2):
        // what else there is depends on them.
        if self.peer.is_some() {
            self.fill(&mut record, room);
        }
        (!record.is_empty()).then(|| self.sent(record))
    }

    /// Whether [`poll_transmit`](Self::poll_transmit) has something (it may still return
    /// `None` when all of it waits on the peer's credit).
    pub fn has_output(&self) -> bool {
        self.parameters.is_some()
            || self.close_frame.is_some()
            || (self.peer.is_some()
                && (!self.control.is_empty()
                    || self.pong_owed.is_some()
                    || !self.sendable.is_empty()))
    }

    /// The largest record's frames: the peer's `max_record_size`, within ours.
    fn record_room(&self) -> usize {
        if !self.version.has_records() {
            // One frame per unit; draft-00's `max_frame_size` default (16,384) bounds it.
            return 16_384;
        }
        let peer = self
            .peer
            .as_ref()
            .map_or(crate::params::DEFAULT_MAX_RECORD_SIZE, |peer| {
                peer.max_record_size
            });
        usize::try_from(peer).unwrap_or(usize::MAX).min(MOST_RECORD)
    }

    fn fill(&mut self, record: &mut BytesMut, room: usize) {
        let single = !self.version.has_records();
        while let Some(frame) = self.control.front() {
            if record.len() + frame.encoded_len() > room || (single && !record.is_empty()) {
                return;
            }
            if let Some(frame) = self.control.pop_front() {
                frame.encode(record);
            }
        }
        while (!single || record.is_empty()) && record.len() + LEAST_ROOM <= room {
            let Some(key) = self.sendable.pop_first() else {
                break;
            };
            self.send_stream(key.id, record, room);
        }
        if self.buffered < self.config.send_buffer && !self.waiting_writers.is_empty() {
            for id in std::mem::take(&mut self.waiting_writers) {
                if let Some(send) = self
                    .streams
                    .get_mut(&id)
                    .and_then(|stream| stream.send.as_mut())
                {
                    self.wakers.extend(send.writer.take());
                }
            }
        }
    }

    /// Frames what `id` has to send into `record`: as much data as the record, the
    /// stream's credit and the connection's allow, and its FIN once the queue is empty.
    fn send_stream(&mut self, id: u64, record: &mut BytesMut, room: usize) {
        let connection_credit = self.send_max_data - self.sent_data;
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        stream.key = None;
        let Some(send) = stream.send.as_mut() else {
            return;
        };
        if !send.has_output() {
            return;
        }
        let stream_credit = send.max - send.offset;
        let credit = stream_credit.min(connection_credit);
        let fits = stream_data_room(id, send.offset, room - record.len()) as u64;
        let len = (send.queued as u64).min(credit).min(fits) as usize;
        let fin = send.finishing && len == send.queued;
        if len == 0 && !fin {
            // Held by credit: say so once per limit, and wait for it.
            if send.queued > 0 && stream_credit == 0 {
                if send.blocked_at != Some(send.max) {
                    send.blocked_at = Some(send.max);
                    let limit = send.max;
                    self.control
                        .push_back(Frame::StreamDataBlocked { id, limit });
                }
            } else if connection_credit == 0 {
                self.connection_blocked.push(id);
                if self.data_blocked_at != Some(self.send_max_data) {
                    self.data_blocked_at = Some(self.send_max_data);
                    self.control
                        .push_back(Frame::DataBlocked(self.send_max_data));
                }
            }
            return;
        }
        // The header, then the queued chunks copied in: the record is one buffer for the
        // carrier's write.
        let offset = send.offset;
        encode_stream_header(record, id, offset, len, fin);
        let mut left = len;
        while left > 0 {
            let Some(chunk) = send.queue.front_mut() else {
                break;
            };
            let take = left.min(chunk.len());
            record.put_slice(&chunk[..take]);
            chunk.advance(take);
            if chunk.is_empty() {
                send.queue.pop_front();
            }
            left -= take;
        }
        send.queued -= len;
        send.offset += len as u64;
        if fin {
            send.done = true;
        }
        self.sent_data += len as u64;
        self.buffered -= len;
        if fin {
            self.forget_if_finished(id);
        } else {
            self.schedule(id);
        }
    }

    fn sent(&mut self, record: BytesMut) -> Bytes {
        self.bytes_sent += record.len() as u64;
        record.freeze()
    }
}
