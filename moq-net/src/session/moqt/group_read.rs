//! A subgroup stream from the peer, written into the track of the subscription its track
//! alias names: each object a frame, the stream's FIN (or an End of Group object) the
//! group's end.
//!
//! A frame's timestamp is the time it arrived, in milliseconds since the session began
//! (moq-transport objects carry none, as moq-lite before -05 did not). The session's group
//! bounds apply as on moq-lite: a group past them is stopped alone. A stream for no
//! subscription of this side (an alias never given, or one whose subscription ended) is
//! stopped with CANCELLED.

use std::task::Poll;

use bytes::{Buf, BytesMut};
use moqx_kio::Waiter;

use super::RESET_CANCELLED;
use crate::Error;
use crate::coding::DecodeError;
use crate::model::{Frame, GroupProducer};
use crate::moqt::{Draft, ObjectStatus, SubgroupHeader, SubgroupObjects};
use crate::session::context::Context;
use crate::session::stream::Reader;
use crate::session::subscriber::ReceivingBytes;
use crate::transport::RecvStream;

/// Reads one subgroup stream into its group.
pub(crate) struct MoqtGroupRead<R> {
    stream: R,
    buffer: BytesMut,
    fin: bool,
    draft: Draft,
    /// The object ids, once the header is read.
    objects: Option<SubgroupObjects>,
    group: Option<GroupProducer>,
    /// This group against the session's group bounds.
    receiving: ReceivingBytes,
}

impl<R: RecvStream> MoqtGroupRead<R> {
    pub(crate) fn new(reader: Reader<R>, draft: Draft, cx: &Context) -> Self {
        let (stream, buffer) = reader.into_parts();
        Self {
            stream,
            buffer,
            fin: false,
            draft,
            objects: None,
            group: None,
            receiving: ReceivingBytes::new(cx.receiving_group_bytes.clone()),
        }
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        loop {
            match self.step(cx) {
                Ok(Step::Progress) => continue,
                Ok(Step::Done) => return Poll::Ready(Ok(())),
                Err(error) => return Poll::Ready(self.fail(error)),
                Ok(Step::NeedMore) => {}
            }
            if self.fin {
                if !self.buffer.is_empty() {
                    return Poll::Ready(self.fail(Error::Decode));
                }
                if let Some(group) = self.group.take() {
                    group.finish();
                }
                return Poll::Ready(Ok(()));
            }
            match self.stream.poll_read(waiter) {
                Poll::Ready(Ok(Some(chunk))) => self.buffer.extend_from_slice(&chunk),
                Poll::Ready(Ok(None)) => self.fin = true,
                Poll::Ready(Err(error)) => {
                    // A reset is normal truncation (the publisher gave the group up).
                    if let Some(group) = self.group.take() {
                        group.abort(error.into());
                    }
                    return Poll::Ready(Ok(()));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Decodes what the buffer holds: the header, or the next whole object.
    fn step(&mut self, cx: &mut Context) -> Result<Step, Error> {
        let draft = self.draft;
        let Some(objects) = self.objects.as_mut() else {
            let mut cursor = &self.buffer[..];
            let header = match SubgroupHeader::decode(&mut cursor, draft) {
                Ok(header) => header,
                Err(DecodeError::Short) => return Ok(Step::NeedMore),
                Err(error) => return Err(error.into()),
            };
            let used = self.buffer.len() - cursor.len();
            self.buffer.advance(used);
            let route = cx
                .moqt
                .as_ref()
                .and_then(|moqt| moqt.aliases.get(&header.track_alias).copied())
                .and_then(|request_id| cx.routes.get_mut(&request_id));
            let Some(route) = route else {
                tracing::debug!(
                    alias = header.track_alias,
                    "stopping a subgroup stream for no subscription of ours"
                );
                self.stream.stop(RESET_CANCELLED);
                return Ok(Step::Done);
            };
            self.group = Some(route.track.create_group(header.group));
            route.arrived += 1;
            self.objects = Some(SubgroupObjects::new(&header, draft));
            return Ok(Step::Progress);
        };
        // The object's header and its whole payload, or nothing consumed.
        let mut cursor = &self.buffer[..];
        let mut peek = objects.clone();
        let object = match peek.decode(&mut cursor) {
            Ok(object) => object,
            Err(DecodeError::Short) => return Ok(Step::NeedMore),
            Err(error) => return Err(error.into()),
        };
        if object.payload_len > cx.config.limits.max_frame_size {
            tracing::debug!(
                size = object.payload_len,
                "an object over the largest frame accepted"
            );
            cx.counters.groups_refused += 1;
            return self.refuse_group();
        }
        let header_len = self.buffer.len() - cursor.len();
        let size = object.payload_len as usize;
        if cursor.len() < size {
            return Ok(Step::NeedMore);
        }
        *objects = peek;
        self.buffer.advance(header_len);
        let payload = self.buffer.split_to(size).freeze();
        match object.status {
            ObjectStatus::Normal => {}
            ObjectStatus::DoesNotExist => return Ok(Step::Progress),
            ObjectStatus::EndOfGroup | ObjectStatus::EndOfTrack => {
                if let Some(group) = self.group.take() {
                    group.finish();
                }
                return Ok(Step::Progress);
            }
        }
        if !self.receiving.admit(cx, payload.len() as u64) {
            return self.refuse_group();
        }
        let since = cx.now.saturating_duration_since(cx.epoch);
        let timestamp = u64::try_from(since.as_millis()).unwrap_or(u64::MAX);
        let frame = Frame { timestamp, payload };
        // The group's last object with the stream's end already here (a chat message:
        // one object, then FIN, in one packet): the frame and the end go to the group at
        // once, so that a relay forwarding it writes them in one go, its FIN riding with
        // the bytes rather than in a packet of its own (as moq-lite's reader does).
        if self.buffer.is_empty() && self.stream.at_end() {
            if let Some(group) = self.group.take() {
                group.finish_with(frame);
            }
        } else if let Some(group) = self.group.as_mut() {
            group.write_frame(frame);
        }
        Ok(Step::Progress)
    }

    /// This group alone is refused (a bound): stopped, its frames so far aborted.
    fn refuse_group(&mut self) -> Result<Step, Error> {
        self.stream.stop(RESET_CANCELLED);
        if let Some(group) = self.group.take() {
            group.abort(Error::BoundsExceeded);
        }
        Ok(Step::Done)
    }

    /// Malformed bytes: the group is aborted and the session closes (a protocol
    /// violation on every draft).
    fn fail(&mut self, error: Error) -> Result<(), Error> {
        tracing::debug!(%error, "a malformed subgroup stream");
        self.stream.stop(0x0);
        if let Some(group) = self.group.take() {
            group.abort(error);
        }
        Err(Error::ProtocolViolation)
    }
}

/// What one decoding step did.
enum Step {
    Progress,
    NeedMore,
    Done,
}
