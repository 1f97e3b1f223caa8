//! The publisher half on moq-transport: the peer's SUBSCRIBE served from
//! [`SessionConfig::publish`](crate::session::SessionConfig::publish), the origin moq-lite
//! sessions serve from too.
//!
//! A subscription is answered SUBSCRIBE_OK once its track is there (a relay's on-demand
//! track once upstream has it), each group then goes out as subgroup 0 on a stream of its
//! own (`GroupFormat::Moqt`), and PUBLISH_DONE says when the track ended. The track alias is
//! the request id, unique in the session. On 14 and 16 the replies travel on the control
//! stream and UNSUBSCRIBE ends the subscription; on 18 they travel on the request's own
//! stream, and the subscriber resetting it ends it.
//!
//! A SUBSCRIBE whose broadcast is not there yet waits for it as long as its
//! RENDEZVOUS_TIMEOUT asks (`rendezvous.rs`).
//!
//! TRACK_STATUS is served as a subscription that stops at its answer: once the track is
//! there, TRACK_STATUS_OK (14) or REQUEST_OK (16, 18) with LARGEST_OBJECT (the latest
//! group's start: the model counts groups, not the objects of one still being written;
//! none while no group exists), and no objects. A relay resolves an on-demand track for
//! it as for a SUBSCRIBE (the draft lets it subscribe upstream to answer).
//!
//! Mapped, as both sides can say it: the filter's start group (AbsoluteStart,
//! AbsoluteRange) and end group; the subscriber priority; FORWARD 0 (no groups until the
//! subscription ends). Not mapped: LargestObject and NextGroupStart both start at the
//! track's latest group (the model serves whole groups); a descending group order is
//! served ascending; REQUEST_UPDATE is ignored.

use std::task::Poll;

use bytes::Bytes;
use moqx_kio::Waiter;

use super::names;
use super::rendezvous::Rendezvous;
use super::request_stream::{StreamEnd, poll_until_end};
use super::requests::Refuse;
use crate::Error;
use crate::model::{BroadcastConsumer, FollowedTrack, Path, PendingTrack};
use crate::moqt::{
    Control as ControlMessage, Draft, Filter, GroupOrder, Location, MessageParameters, PublishDone,
    RequestOk, Subscribe, SubscribeOk, TrackRequest, TrackStatus, TrackStatusOk,
};
use crate::session::context::Context;
use crate::session::group_write::{Control, GroupWrite};
use crate::session::publisher::RequestSlot;
use crate::session::stream::{Reader, Writer};
use crate::session::task::Open;
use crate::transport::{RecvStream, SendStream};

/// The subscriber priority of a SUBSCRIBE that names none (§ "SUBSCRIBER_PRIORITY").
const DEFAULT_SUBSCRIBER_PRIORITY: u8 = 128;

/// PUBLISH_DONE statuses, every draft.
const STATUS_INTERNAL_ERROR: u64 = 0x0;
const STATUS_TRACK_ENDED: u64 = 0x2;
const STATUS_SUBSCRIPTION_ENDED: u64 = 0x3;

/// One of the peer's subscriptions, served.
pub(crate) struct MoqtSubscribeServe<S, R> {
    core: Subscription,
    /// 18: the request's own stream, where the replies go and whose reset cancels.
    stream: Option<(Writer<S>, Reader<R>)>,
}

/// What serving a subscription needs whatever carries its replies.
pub(crate) struct Subscription {
    request_id: u64,
    draft: Draft,
    /// A TRACK_STATUS: answered once the track is there, no objects sent.
    status_only: bool,
    /// 14, 16: UNSUBSCRIBE sets it (through the session's registry).
    unsubscribed: Option<moqx_kio::Consumer<bool>>,
    state: State,
    /// Counts this subscription against the session's bound while it lives.
    _slot: RequestSlot,
}

enum State {
    /// Waiting for a publisher of the broadcast (a SUBSCRIBE's RENDEZVOUS_TIMEOUT, 18).
    Rendezvous {
        wait: Rendezvous,
        path: Path,
        priorities: (u8, u8),
        end_group: Option<u64>,
        forward: bool,
    },
    /// Waiting for the track (an on-demand one: until upstream has it).
    Resolving {
        path: Path,
        priorities: (u8, u8),
        end_group: Option<u64>,
        forward: bool,
        broadcast: BroadcastConsumer,
        pending: PendingTrack,
    },
    Serving {
        track: FollowedTrack,
        /// What the group writers follow: a cancel stops them.
        control: moqx_kio::Producer<Control>,
        priorities: (u8, u8),
        end_group: Option<u64>,
        forward: bool,
        /// Data streams opened so far (PUBLISH_DONE's stream count).
        streams: u64,
    },
    /// Replied for the last time: on 18 the stream ends.
    Finishing,
}

/// Starts serving `subscribe` (a SUBSCRIBE, or a TRACK_STATUS: same layout), or says why
/// it is refused.
pub(super) fn plan<const TYPE: u64>(
    subscribe: &TrackRequest<TYPE>,
    cx: &mut Context,
) -> Result<Subscription, Refuse> {
    let draft = cx.moqt.as_ref().ok_or(Refuse::Internal)?.draft;
    let status_only = TrackStatus::message_type(draft) == Some(TYPE);
    let path = names::path_of(&subscribe.namespace).ok_or(Refuse::DoesNotExist)?;
    let name = names::track_of(&subscribe.name).ok_or(Refuse::DoesNotExist)?;
    if let Some(memory) = cx.config.memory_budget.as_ref().filter(|m| m.is_full()) {
        memory.note_subscription_refused();
        cx.counters.subscriptions_refused += 1;
        return Err(Refuse::ExcessiveLoad);
    }
    let Some(slot) = RequestSlot::take(&cx.subscriptions, cx.config.limits.max_subscriptions)
    else {
        cx.counters.subscriptions_refused += 1;
        return Err(Refuse::ExcessiveLoad);
    };
    let parameters = &subscribe.parameters;
    let (start, end_group) = match parameters.filter {
        Some(Filter::AbsoluteStart(start)) => (Some(start.group), None),
        Some(Filter::AbsoluteRange { start, end_group }) => (Some(start.group), Some(end_group)),
        _ => (None, None),
    };
    let priorities = (
        parameters
            .subscriber_priority
            .unwrap_or(DEFAULT_SUBSCRIBER_PRIORITY),
        0,
    );
    let forward = parameters.forward.unwrap_or(true);
    let rendezvous = parameters
        .rendezvous_timeout
        .filter(|wait| !wait.is_zero() && !status_only);
    let state = match crate::session::publisher::resolve(cx, &path, name, start, true) {
        Ok((broadcast, pending)) => State::Resolving {
            path: path.clone(),
            priorities,
            end_group,
            forward,
            broadcast,
            pending,
        },
        Err(Error::NotFound) if rendezvous.is_some() => {
            let wait = rendezvous.unwrap_or_default();
            State::Rendezvous {
                wait: Rendezvous::hold(subscribe.request_id, &path, name, start, wait, cx)
                    .ok_or(Refuse::DoesNotExist)?,
                path: path.clone(),
                priorities,
                end_group,
                forward,
            }
        }
        Err(error) => return Err(Refuse::from_error(error)),
    };
    tracing::debug!(%path, track = name, ?start, ?end_group, status_only, "the peer subscribes");
    if !status_only {
        cx.counters.subscriptions_served += 1;
    }
    let unsubscribed = cx
        .moqt
        .as_mut()
        .filter(|moqt| !moqt.draft.has_request_streams())
        .map(|moqt| moqt.watch_unsubscribe(subscribe.request_id));
    Ok(Subscription {
        request_id: subscribe.request_id,
        draft,
        status_only,
        unsubscribed,
        state,
        _slot: slot,
    })
}

impl<S: SendStream, R: RecvStream> MoqtSubscribeServe<S, R> {
    /// A subscription whose replies travel on the control stream (14, 16).
    pub(crate) fn on_control_stream(core: Subscription) -> Self {
        Self { core, stream: None }
    }

    /// A subscription on its own request stream (18).
    pub(crate) fn on_stream(core: Subscription, writer: Writer<S>, reader: Reader<R>) -> Self {
        Self {
            core,
            stream: Some((writer, reader)),
        }
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        loop {
            if !matches!(self.core.state, State::Finishing) && self.poll_cancelled(waiter, cx) {
                tracing::debug!(id = self.core.request_id, "the peer ended its subscription");
                self.end(cx);
                return Poll::Ready(Ok(()));
            }
            match &mut self.core.state {
                State::Rendezvous {
                    wait,
                    path,
                    priorities,
                    end_group,
                    forward,
                } => match wait.poll(waiter, cx) {
                    Poll::Ready(Ok((broadcast, pending))) => {
                        self.core.state = State::Resolving {
                            path: path.clone(),
                            priorities: *priorities,
                            end_group: *end_group,
                            forward: *forward,
                            broadcast,
                            pending,
                        };
                    }
                    Poll::Ready(Err(why)) => self.refuse(cx, why)?,
                    Poll::Pending => return self.poll_flush(waiter, cx),
                },
                State::Resolving {
                    path,
                    priorities,
                    end_group,
                    forward,
                    broadcast,
                    pending,
                } => match pending.poll_track(waiter) {
                    Poll::Ready(Ok(track)) if self.core.status_only => {
                        let status = self.core.status(track.latest());
                        self.core.state = State::Finishing;
                        match status {
                            Status::Ok14(ok) => self.reply(cx, &ok)?,
                            Status::Ok(ok) => self.reply(cx, &ok)?,
                        }
                    }
                    Poll::Ready(Ok(track)) => {
                        let publisher_priority = track.track().priority;
                        let track = match &cx.config.publish {
                            Some(origin) => FollowedTrack::following(
                                origin,
                                path.clone(),
                                cx.peer_origin,
                                broadcast.clone(),
                                track,
                            ),
                            None => FollowedTrack::fixed(track),
                        };
                        let ok = SubscribeOk {
                            request_id: self
                                .core
                                .draft
                                .has_reply_request_ids()
                                .then_some(self.core.request_id),
                            track_alias: self.core.request_id,
                            group_order: (self.core.draft == Draft::D14)
                                .then_some(GroupOrder::Ascending),
                            ..SubscribeOk::default()
                        };
                        self.core.state = State::Serving {
                            track,
                            control: moqx_kio::Producer::new(Control {
                                cancelled: false,
                                priority: priorities.0,
                            }),
                            priorities: (priorities.0, publisher_priority),
                            end_group: *end_group,
                            forward: *forward,
                            streams: 0,
                        };
                        self.reply(cx, &ok)?;
                    }
                    Poll::Ready(Err(error)) => {
                        tracing::debug!(id = self.core.request_id, %error, "refusing the peer's subscription");
                        self.refuse(cx, Refuse::from_error(error))?;
                    }
                    Poll::Pending => return self.poll_flush(waiter, cx),
                },
                State::Serving {
                    track,
                    control,
                    priorities,
                    end_group,
                    forward,
                    streams,
                } => {
                    let draft = self.core.draft;
                    let done = loop {
                        let lagged = track.lagged();
                        let next = track.poll_next_group(waiter);
                        cx.counters.groups_skipped += track.lagged() - lagged;
                        match next {
                            Poll::Ready(Ok(Some(group))) => {
                                let sequence = group.sequence();
                                if end_group.is_some_and(|end| sequence > end) {
                                    break Some((STATUS_SUBSCRIPTION_ENDED, "the range ended"));
                                }
                                if *forward {
                                    *streams += 1;
                                    cx.opens.push_back(Open::Group(GroupWrite::plan_moqt(
                                        self.core.request_id,
                                        self.core.request_id,
                                        group,
                                        *priorities,
                                        control.consume(),
                                        draft,
                                    )));
                                }
                                if end_group.is_some_and(|end| sequence == end) {
                                    break Some((STATUS_SUBSCRIPTION_ENDED, "the range ended"));
                                }
                            }
                            Poll::Ready(Ok(None)) => {
                                break Some((STATUS_TRACK_ENDED, "the track ended"));
                            }
                            Poll::Ready(Err(error)) => {
                                tracing::debug!(%error, "a served track failed");
                                break Some((STATUS_INTERNAL_ERROR, "the track failed"));
                            }
                            Poll::Pending => break None,
                        }
                    };
                    let Some((status, reason)) = done else {
                        return self.poll_flush(waiter, cx);
                    };
                    let message = PublishDone {
                        request_id: draft
                            .has_reply_request_ids()
                            .then_some(self.core.request_id),
                        status,
                        stream_count: *streams,
                        reason: reason.to_owned(),
                    };
                    // Groups in flight are still written: the control is dropped, not
                    // cancelled.
                    self.core.state = State::Finishing;
                    self.reply(cx, &message)?;
                }
                State::Finishing => {
                    self.end(cx);
                    return match self.stream.as_mut() {
                        Some((writer, _)) => writer.poll_finish(waiter).map(Ok),
                        None => Poll::Ready(Ok(())),
                    };
                }
            }
        }
    }

    /// Whether the subscriber ended the subscription: UNSUBSCRIBE (14, 16), or its reset
    /// of the request stream (18). On 18 what else it sends on the stream (REQUEST_UPDATE)
    /// is read and left unapplied; its FIN only says no more will come.
    fn poll_cancelled(&mut self, waiter: &Waiter, cx: &Context) -> bool {
        if let Some(unsubscribed) = &self.core.unsubscribed {
            return !matches!(
                unsubscribed.poll_until(waiter, |unsubscribed| unsubscribed.then_some(())),
                Poll::Pending
            );
        }
        let Some((_, reader)) = self.stream.as_mut() else {
            return false;
        };
        let Some(draft) = cx.moqt.as_ref().map(|moqt| moqt.draft) else {
            return true;
        };
        let end = poll_until_end(reader, waiter, draft, |frame| {
            tracing::debug!(
                kind = frame.kind,
                "a message on a subscription's stream, not applied"
            );
            Ok(())
        });
        matches!(end, Poll::Ready(StreamEnd::Reset | StreamEnd::Malformed(_)))
    }

    /// Sends a reply where this subscription's replies go.
    fn reply<C: ControlMessage + std::fmt::Debug>(
        &mut self,
        cx: &mut Context,
        message: &C,
    ) -> Result<(), Error> {
        match self.stream.as_mut() {
            Some((writer, _)) => {
                let bytes = message.to_vec(self.core.draft).map_err(|error| {
                    tracing::debug!(%error, message = C::NAME, "could not encode a reply");
                    Error::Encode
                })?;
                writer.queue(Bytes::from(bytes));
                Ok(())
            }
            None => cx
                .moqt
                .as_mut()
                .ok_or(Error::ProtocolViolation)?
                .send(message),
        }
    }

    /// Refuses the subscription: the draft's error, then the end.
    fn refuse(&mut self, cx: &mut Context, why: Refuse) -> Result<(), Error> {
        let request_id = self.core.request_id;
        let request = match self.core.status_only {
            true => super::requests::Request::TrackStatus(TrackStatus {
                request_id,
                ..TrackStatus::default()
            }),
            false => super::requests::Request::Subscribe(Subscribe {
                request_id,
                ..Subscribe::default()
            }),
        };
        let refusal = request.refusal(self.core.draft, why)?;
        self.core.state = State::Finishing;
        if let Some(refusal) = refusal {
            match self.stream.as_mut() {
                Some((writer, _)) => writer.queue(refusal),
                None => {
                    if let Some(moqt) = cx.moqt.as_mut() {
                        moqt.queue(refusal);
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes what the request stream holds; a stopped stream (18) ends the subscription.
    fn poll_flush(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        if let Some((writer, _)) = self.stream.as_mut()
            && let Poll::Ready(Err(_)) = writer.poll_flush(waiter)
        {
            self.end(cx);
            return Poll::Ready(Ok(()));
        }
        Poll::Pending
    }

    /// The subscription is over: its group writers stop if it was cancelled, its request
    /// id is done.
    fn end(&mut self, cx: &mut Context) {
        match &self.core.state {
            State::Serving { control, .. } => control.update(|control| control.cancelled = true),
            State::Rendezvous { wait, .. } => wait.forget(cx),
            _ => {}
        }
        self.core.state = State::Finishing;
        if let Some(moqt) = cx.moqt.as_mut()
            && moqt.forget_subscription(self.core.request_id)
        {
            // A grant failing to encode has nowhere to go but the log.
            let _ = moqt.request_done();
        }
    }
}

/// A TRACK_STATUS's answer on its draft.
enum Status {
    /// 14's TRACK_STATUS_OK.
    Ok14(TrackStatusOk),
    /// REQUEST_OK (16, 18).
    Ok(RequestOk),
}

impl Subscription {
    /// The answer to a TRACK_STATUS whose track's latest group is `latest`.
    fn status(&self, latest: Option<u64>) -> Status {
        let parameters = MessageParameters {
            largest_object: latest.map(|group| Location { group, object: 0 }),
            ..MessageParameters::default()
        };
        match self.draft {
            Draft::D14 => Status::Ok14(TrackStatusOk {
                request_id: Some(self.request_id),
                track_alias: 0,
                group_order: Some(GroupOrder::Ascending),
                parameters,
                ..TrackStatusOk::default()
            }),
            draft => Status::Ok(RequestOk {
                request_id: draft.has_reply_request_ids().then_some(self.request_id),
                parameters,
                ..RequestOk::default()
            }),
        }
    }
}
