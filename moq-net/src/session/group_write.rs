//! Writing one group to its own uni stream: the subscription's group writer, on moq-lite
//! (the stream type, GROUP, then each frame with its timestamp) and on moq-transport (a
//! SUBGROUP_HEADER, then each frame as an object).

use moqx_kio::Waiter;
use std::task::Poll;

use super::stream::Writer;
use crate::Error;
use crate::coding::{FrameHeader, Group, Message, UniStream};
use crate::model::GroupConsumer;
use crate::moqt::{
    Draft, ObjectStatus, SubgroupHeader, SubgroupId, SubgroupObject, SubgroupObjects,
};
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
    format: GroupFormat,
}

/// How a group is said on its stream.
#[derive(Debug, Clone)]
pub(crate) enum GroupFormat {
    /// moq-lite: the stream type and GROUP, then each frame with its timestamp.
    Lite,
    /// moq-transport: the group as subgroup 0 of the track the subscription's alias
    /// names, each frame an object (ids from 0), FIN at the group's end. A frame's
    /// timestamp has no place on this wire: it is not sent.
    Moqt {
        draft: Draft,
        track_alias: u64,
        /// The track's priority, the publisher priority every object of it carries.
        publisher_priority: u8,
        /// The object ids, once the header is written.
        objects: Option<SubgroupObjects>,
        next_object: u64,
    },
}

impl GroupFormat {
    /// The code a stream of this format is reset with for `error`: moq-lite's own; on
    /// moq-transport CANCELLED for a subscription that ended, INTERNAL_ERROR for the rest
    /// (the drafts have no code for a group the cache dropped).
    fn reset_code(&self, error: Error) -> u64 {
        match self {
            GroupFormat::Lite => error.to_code(),
            GroupFormat::Moqt { .. } if error == Error::Cancel => super::moqt::RESET_CANCELLED,
            GroupFormat::Moqt { .. } => 0x0,
        }
    }

    /// Encodes the stream's header for group `header` into `batch`.
    fn encode_header(
        &mut self,
        header: Group,
        version: crate::coding::Version,
        batch: &mut bytes::BytesMut,
    ) -> Result<(), Error> {
        match self {
            GroupFormat::Lite => Ok(UniStream::Group
                .encode(batch, version)
                .and_then(|()| header.encode(batch, version))?),
            GroupFormat::Moqt {
                draft,
                track_alias,
                publisher_priority,
                objects,
                ..
            } => {
                let subgroup = SubgroupHeader {
                    track_alias: *track_alias,
                    group: header.sequence,
                    subgroup: SubgroupId::Zero,
                    priority: Some(*publisher_priority),
                    properties: false,
                    end_of_group: true,
                    first_object: draft.has_first_object_bit(),
                };
                subgroup.encode(batch, *draft).map_err(Error::from)?;
                *objects = Some(SubgroupObjects::new(&subgroup, *draft));
                Ok(())
            }
        }
    }

    /// Encodes the header of one frame of `size` bytes into `batch`.
    fn encode_frame(
        &mut self,
        previous: u64,
        timestamp: u64,
        size: usize,
        version: crate::coding::Version,
        batch: &mut bytes::BytesMut,
    ) -> Result<(), Error> {
        match self {
            GroupFormat::Lite => {
                Ok(FrameHeader::new(previous, timestamp, size as u64).encode(batch, version)?)
            }
            GroupFormat::Moqt {
                objects,
                next_object,
                ..
            } => {
                let objects = objects.as_mut().ok_or(Error::Encode)?;
                let object = SubgroupObject {
                    id: *next_object,
                    payload_len: size as u64,
                    status: ObjectStatus::Normal,
                    ..SubgroupObject::default()
                };
                objects.encode(&object, batch).map_err(Error::from)?;
                *next_object += 1;
                Ok(())
            }
        }
    }
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
            format: GroupFormat::Lite,
        }
    }

    /// A group of a moq-transport subscription (`request_id`, its track under
    /// `track_alias`) to write once its stream is open.
    pub(crate) fn plan_moqt(
        request_id: u64,
        track_alias: u64,
        group: GroupConsumer,
        priorities: (u8, u8),
        control: moqx_kio::Consumer<Control>,
        draft: Draft,
    ) -> Self {
        let (subscriber_priority, publisher_priority) = priorities;
        let mut plan = Self::plan(request_id, group, subscriber_priority, control);
        plan.format = GroupFormat::Moqt {
            draft,
            track_alias,
            publisher_priority,
            objects: None,
            next_object: 0,
        };
        plan
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
            format: self.format,
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
            writer.stream_mut().reset(self.format.reset_code(error));
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
                    writer
                        .stream_mut()
                        .reset(self.format.reset_code(Error::Cancel));
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
            let encoded = self.format.encode_header(self.header, version, &mut batch);
            if let Err(error) = encoded {
                // This group cannot be said on the wire: it alone is given up.
                writer.stream_mut().reset(self.format.reset_code(error));
                return Poll::Ready(Ok(()));
            }
        }
        while !self.ended {
            match self.group.poll_read_frame(waiter) {
                Poll::Ready(Ok(Some(frame))) => {
                    let size = frame.payload.len();
                    counters.frames_sent += 1;
                    counters.payload_bytes_sent += size as u64;
                    let previous = std::mem::replace(&mut self.previous, frame.timestamp);
                    let encoded = self.format.encode_frame(
                        previous,
                        frame.timestamp,
                        size,
                        version,
                        &mut batch,
                    );
                    if let Err(error) = encoded {
                        writer.stream_mut().reset(self.format.reset_code(error));
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
                    writer.stream_mut().reset(self.format.reset_code(error));
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
