//! Writing one group to its own uni stream: the subscription's group writer, on moq-lite
//! (the stream type, GROUP, then each frame with its timestamp) and on moq-transport (a
//! SUBGROUP_HEADER, then each frame as an object).

use moqx_kio::Waiter;
use std::task::Poll;

use super::stream::Writer;
use crate::Error;
use crate::coding::{FrameHeader, Group, Message, UniStream};
use crate::model::GroupConsumer;
use crate::transport::{SendStream, StreamPriority};

/// What a subscription tells its group writers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Control {
    /// The subscriber cancelled: stop.
    pub(crate) cancelled: bool,
    /// The subscriber's current priority.
    pub(crate) priority: u8,
}

/// Writes one group to its uni stream: the stream type and GROUP header, each frame as it
/// is published, then FIN. The group's error resets the stream with its code; the end of the
/// subscription resets it with `Cancel`.
pub(crate) struct GroupWrite<S> {
    /// `None` while the stream is not open yet (a plan in the open queue).
    writer: Option<Writer<S>>,
    group: GroupConsumer,
    header: Group,
    /// The subscriber priority the stream's priority was last set from.
    subscriber_priority: u8,
    /// The subscription's control; `None` once it ended without a cancel (nothing more to
    /// watch).
    control: Option<moqx_kio::Consumer<Control>>,
    previous: u64,
    started: bool,
    ended: bool,
}

impl GroupWrite<()> {
    /// A group to write once its stream is open.
    pub(crate) fn plan(
        subscribe_id: u64,
        group: GroupConsumer,
        subscriber_priority: u8,
        control: moqx_kio::Consumer<Control>,
    ) -> Self {
        Self {
            writer: None,
            header: Group {
                subscribe_id,
                sequence: group.sequence(),
            },
            group,
            subscriber_priority,
            control: Some(control),
            previous: 0,
            started: false,
            ended: false,
        }
    }

    /// The sub-machine, with its stream.
    pub(crate) fn with_stream<S: SendStream>(self, mut stream: S) -> GroupWrite<S> {
        stream.set_priority(StreamPriority {
            subscriber: self.subscriber_priority,
            group: self.header.sequence,
        });
        GroupWrite {
            writer: Some(Writer::new(stream)),
            group: self.group,
            header: self.header,
            subscriber_priority: self.subscriber_priority,
            control: self.control,
            previous: 0,
            started: false,
            ended: false,
        }
    }
}

impl<S> GroupWrite<S> {
    /// The subscription and the group it writes.
    pub(crate) fn names(&self) -> (u64, u64) {
        (self.header.subscribe_id, self.header.sequence)
    }
}

impl<S: SendStream> GroupWrite<S> {
    /// Gives the group up: its stream is reset with `error`.
    pub(crate) fn evict(&mut self, error: Error) {
        if let Some(writer) = self.writer.as_mut() {
            writer.stream_mut().reset(error.to_code());
        }
    }

    pub(crate) fn poll(
        &mut self,
        waiter: &Waiter,
        version: crate::coding::Version,
        counters: &mut super::SessionCounters,
    ) -> Poll<Result<(), Error>> {
        let Some(writer) = self.writer.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        // Follow the subscription's control until it has nothing new (which leaves the
        // waiter registered on it): a cancel stops the group, a priority change moves it.
        while let Some(control) = self.control.as_ref() {
            let current = self.subscriber_priority;
            let change = control.poll_until(waiter, |control| {
                (control.cancelled || control.priority != current).then_some(*control)
            });
            match change {
                Poll::Ready(Ok(Control {
                    cancelled: true, ..
                })) => {
                    writer.stream_mut().reset(Error::Cancel.to_code());
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Ok(Control { priority: new, .. })) => {
                    self.subscriber_priority = new;
                    writer.stream_mut().set_priority(StreamPriority {
                        subscriber: new,
                        group: self.header.sequence,
                    });
                }
                Poll::Ready(Err(_)) => self.control = None, // ended without a cancel
                Poll::Pending => break,
            }
        }
        // Headers and small payloads go out in one write; a large payload is written as
        // its own `Bytes`, without a copy.
        let mut batch = bytes::BytesMut::new();
        if !self.started {
            self.started = true;
            let header = self.header;
            let encoded = UniStream::Group
                .encode(&mut batch, version)
                .and_then(|()| header.encode(&mut batch, version));
            if let Err(error) = encoded {
                // This group cannot be said on the wire: it alone is given up.
                writer.stream_mut().reset(Error::from(error).to_code());
                return Poll::Ready(Ok(()));
            }
        }
        while !self.ended {
            match self.group.poll_read_frame(waiter) {
                Poll::Ready(Ok(Some(frame))) => {
                    let size = frame.payload.len();
                    counters.frames_sent += 1;
                    counters.payload_bytes_sent += size as u64;
                    let header = FrameHeader::new(self.previous, frame.timestamp, size as u64);
                    self.previous = frame.timestamp;
                    if let Err(error) = header.encode(&mut batch, version) {
                        writer.stream_mut().reset(Error::from(error).to_code());
                        return Poll::Ready(Ok(()));
                    }
                    if size <= COPY_LIMIT {
                        batch.extend_from_slice(&frame.payload);
                    } else {
                        writer.queue(batch.split().freeze());
                        writer.queue(frame.payload);
                    }
                }
                Poll::Ready(Ok(None)) => self.ended = true,
                Poll::Ready(Err(error)) => {
                    writer.stream_mut().reset(error.to_code());
                    return Poll::Ready(Ok(()));
                }
                Poll::Pending => break,
            }
        }
        writer.queue(batch.freeze());
        if self.ended {
            // The last bytes and the FIN in one write: see `SendStream::poll_write_final`.
            return writer.poll_finish(waiter).map(Ok);
        }
        match writer.poll_flush(waiter) {
            // Blocked on credit: the wake that brings credit also reports a STOP_SENDING.
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(_)) => return Poll::Ready(Ok(())), // the stream is gone
            Poll::Ready(Ok(())) => {}
        }
        // All written, and the group has more to come: meanwhile, watch for the peer's
        // STOP_SENDING (it does not want this group). A group written whole in one poll,
        // as chat's are, never watches.
        if writer.stream_mut().poll_stopped(waiter).is_ready() {
            return Poll::Ready(Ok(()));
        }
        Poll::Pending
    }
}

/// Payloads up to this size are copied next to their frame header so that a frame is one
/// write; larger ones are handed to the stream as they are.
const COPY_LIMIT: usize = 1024;
