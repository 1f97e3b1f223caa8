//! A subgroup stream from the peer, written into the track of the subscription its track
//! alias names: each object a frame, the stream's FIN (or an End of Group object) the
//! group's end.
//!
//! A frame's timestamp is the time it arrived, in milliseconds since the session began
//! (moq-transport objects carry none, as moq-lite before -05 did not). The session's group
//! bounds apply as on moq-lite: a group past them is stopped alone. A stream for no
//! subscription of this side (an alias never given, or one whose subscription ended) is
//! stopped with CANCELLED.
//!
//! A stream can come before the SUBSCRIBE_OK that gives its alias (they travel on
//! different streams; a publisher sends its first group at once): while a subscription of
//! this side awaits its answer, a stream of an alias not known yet waits for it, reading
//! nothing past its header (its flow control withheld, as the drafts allow), and is
//! stopped once no subscription awaits one. Abandoning it at once lost every first group
//! from moq-dev/moq's publishers (a clock's whole minute). At most
//! [`MOST_STREAMS_AWAITING_ALIAS`] wait at a time; the rest are stopped.

use std::task::Poll;

use bytes::{Buf, BytesMut};
use moqx_kio::Waiter;

use super::{MoqtState, RESET_CANCELLED};
use crate::Error;
use crate::coding::DecodeError;
use crate::model::{Frame, GroupProducer};
use crate::moqt::{Draft, ObjectStatus, SubgroupHeader, SubgroupObjects};
use crate::session::context::Context;
use crate::session::stream::Reader;
use crate::session::subscriber::ReceivingBytes;
use crate::transport::RecvStream;

/// The most data streams that wait for their alias at once, per session.
pub(crate) const MOST_STREAMS_AWAITING_ALIAS: usize = 16;

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
    /// Its header, while its alias is not known yet, and the subscriptions' news seen.
    awaiting: Option<(SubgroupHeader, moqx_kio::Consumer<u64>, u64)>,
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
            awaiting: None,
        }
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        loop {
            match self.step(cx) {
                Ok(Step::Progress) => continue,
                Ok(Step::Done) => return Poll::Ready(Ok(())),
                Err(error) => return Poll::Ready(self.fail(error)),
                Ok(Step::NeedMore) => {}
                Ok(Step::AwaitAlias) => {
                    let Some((_, news, seen)) = self.awaiting.as_mut() else {
                        continue;
                    };
                    let seen_now = *seen;
                    match news.poll_until(waiter, |news| (*news != seen_now).then_some(*news)) {
                        Poll::Ready(Ok(news)) => {
                            *seen = news;
                            continue;
                        }
                        // The session's state went: nothing will name the alias.
                        Poll::Ready(Err(_)) => {
                            self.stop_awaiting(cx);
                            self.stream.stop(RESET_CANCELLED);
                            return Poll::Ready(Ok(()));
                        }
                        Poll::Pending => return Poll::Pending,
                    }
                }
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
            let header = match &self.awaiting {
                Some((header, _, _)) => *header,
                None => {
                    let mut cursor = &self.buffer[..];
                    let header = match SubgroupHeader::decode(&mut cursor, draft) {
                        Ok(header) => header,
                        Err(DecodeError::Short) => return Ok(Step::NeedMore),
                        Err(error) => return Err(error.into()),
                    };
                    let used = self.buffer.len() - cursor.len();
                    self.buffer.advance(used);
                    header
                }
            };
            let known = cx
                .moqt
                .as_ref()
                .and_then(|moqt| moqt.aliases.get(&header.track_alias).copied())
                .filter(|request_id| cx.routes.contains_key(request_id));
            let Some(request_id) = known else {
                if self.await_alias(&header, cx) {
                    return Ok(Step::AwaitAlias);
                }
                tracing::debug!(
                    alias = header.track_alias,
                    "stopping a subgroup stream for no subscription of ours"
                );
                self.stream.stop(RESET_CANCELLED);
                return Ok(Step::Done);
            };
            self.stop_awaiting(cx);
            let Some(route) = cx.routes.get_mut(&request_id) else {
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

    /// Whether the stream of `header`, whose alias is not known, waits for it: while a
    /// subscription of this side awaits its SUBSCRIBE_OK, within the session's bound on
    /// streams waiting. Counts the stream against the bound from its first wait.
    fn await_alias(&mut self, header: &SubgroupHeader, cx: &mut Context) -> bool {
        let Some(moqt) = cx.moqt.as_mut() else {
            return false;
        };
        if !unanswered(moqt, cx.routes.keys().copied()) {
            self.stop_awaiting_in(moqt);
            return false;
        }
        if self.awaiting.is_none() {
            if moqt.streams_awaiting_alias >= MOST_STREAMS_AWAITING_ALIAS {
                return false;
            }
            moqt.streams_awaiting_alias += 1;
            tracing::debug!(
                alias = header.track_alias,
                "a subgroup stream before its SUBSCRIBE_OK: waiting for its alias"
            );
            let news = moqt.alias_news.consume();
            let seen = *news.borrow();
            self.awaiting = Some((*header, news, seen));
        }
        true
    }

    /// The stream no longer waits for its alias: it leaves the session's count.
    fn stop_awaiting(&mut self, cx: &mut Context) {
        if let Some(moqt) = cx.moqt.as_mut() {
            self.stop_awaiting_in(moqt);
        }
    }

    fn stop_awaiting_in(&mut self, moqt: &mut MoqtState) {
        if self.awaiting.take().is_some() {
            moqt.streams_awaiting_alias = moqt.streams_awaiting_alias.saturating_sub(1);
        }
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

/// Whether one of this side's subscriptions (`routes`, by request id) awaits its
/// SUBSCRIBE_OK: it has no alias yet.
fn unanswered(moqt: &MoqtState, mut routes: impl Iterator<Item = u64>) -> bool {
    routes.any(|request_id| !moqt.aliases.values().any(|aliased| *aliased == request_id))
}

/// What one decoding step did.
enum Step {
    Progress,
    NeedMore,
    /// The header is read and its alias not known yet: wait for the subscriptions' news.
    AwaitAlias,
    Done,
}
