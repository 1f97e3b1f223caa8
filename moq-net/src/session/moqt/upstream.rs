//! The subscriber half on moq-transport: a local consumer of a broadcast the peer
//! published (PUBLISH_NAMESPACE) asks for a track, and this side subscribes to it
//! upstream; the groups that arrive (`group_read.rs`) fill the track, and the subscription
//! is cancelled when the last local consumer leaves (after the session's linger).
//!
//! On 14 and 16 SUBSCRIBE and UNSUBSCRIBE travel on the control stream and their replies
//! come back there, by request id; on 18 each subscription has its own request stream,
//! reset to cancel. Either way the subscription's route lives in the context's routes
//! under its request id; its track alias (the publisher's choice, in SUBSCRIBE_OK) leads
//! data streams to it.

use std::task::Poll;

use bytes::Bytes;
use moqx_kio::Waiter;

use super::{RESET_CANCELLED, names};
use crate::Error;
use crate::model::{Path, TrackProducer};
use crate::moqt::{
    Control, Draft, Filter, Frame, GroupOrder, Location, MessageParameters, PublishDone,
    RequestError, Subscribe, SubscribeError, SubscribeOk, Unsubscribe,
};
use crate::session::context::{Context, Ending, Route};
use crate::session::stream::{ReadError, Reader, Writer};
use crate::session::task::{Open, Spawn};
use crate::transport::{RecvStream, SendStream};

/// PUBLISH_DONE's stream count when the publisher cannot say (every draft).
const UNKNOWN_STREAM_COUNT: u64 = crate::moqt::UNKNOWN_STREAM_COUNT;

/// A subscription to the peer: cancels it when nobody wants the track; on 18 also writes
/// the SUBSCRIBE and reads the replies on its request stream.
pub(crate) struct Upstream<S, R> {
    request_id: u64,
    /// 18: the subscription's request stream.
    stream: Option<(Writer<S>, Reader<R>)>,
}

/// An 18 subscription waiting for its request stream: the SUBSCRIBE to write on it.
pub(crate) struct UpstreamPlan {
    request_id: u64,
    subscribe: Bytes,
}

/// Subscribes to track `track` of the peer's broadcast at `path`, from group `start` (the
/// latest when `None`).
pub(crate) fn subscribe(path: &Path, track: TrackProducer, start: Option<u64>, cx: &mut Context) {
    let Some(moqt) = cx.moqt.as_mut() else {
        return;
    };
    let draft = moqt.draft;
    // spec: a sender out of request ids says so (REQUESTS_BLOCKED) and waits. This side
    // does not queue: the local consumer is refused, and may ask again.
    let Some(request_id) = moqt.take_own_request_id() else {
        track.abort(Error::BoundsExceeded);
        return;
    };
    let name = track.track().name.clone();
    let subscribe = Subscribe {
        request_id,
        namespace: names::namespace_of(path),
        name: Bytes::from(name.clone().into_bytes()),
        parameters: MessageParameters {
            subscriber_priority: Some(track.track().priority),
            group_order: Some(GroupOrder::Ascending),
            forward: Some(true),
            filter: Some(match start {
                Some(group) => Filter::AbsoluteStart(Location { group, object: 0 }),
                None => Filter::LargestObject,
            }),
            ..MessageParameters::default()
        },
    };
    tracing::debug!(%path, track = %name, request_id, ?start, "subscribing upstream");
    // The route first: a group that arrives before SUBSCRIBE_OK is not lost to it.
    cx.routes.insert(request_id, Route::new(track));
    if draft.has_request_streams() {
        match subscribe.to_vec(draft) {
            Ok(bytes) => cx.opens.push_back(Open::MoqtUpstream(UpstreamPlan {
                request_id,
                subscribe: Bytes::from(bytes),
            })),
            Err(error) => {
                tracing::debug!(%error, "could not encode SUBSCRIBE");
                abort(cx, request_id, Error::Encode);
            }
        }
        return;
    }
    if let Err(error) = moqt.send(&subscribe) {
        abort(cx, request_id, error);
        return;
    }
    cx.spawned.push(Spawn::MoqtUpstream(request_id));
}

impl UpstreamPlan {
    /// The subscription, on its request stream.
    pub(crate) fn with_streams<S: SendStream, R: RecvStream>(
        self,
        send: S,
        recv: R,
        cx: &Context,
    ) -> Upstream<S, R> {
        let mut writer = Writer::new(send);
        writer.queue(self.subscribe);
        Upstream {
            request_id: self.request_id,
            stream: Some((
                writer,
                Reader::new(recv, cx.config.limits.max_message_bytes),
            )),
        }
    }
}

impl<S: SendStream, R: RecvStream> Upstream<S, R> {
    /// A subscription whose SUBSCRIBE went on the control stream (14, 16).
    pub(crate) fn on_control_stream(request_id: u64) -> Self {
        Self {
            request_id,
            stream: None,
        }
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        let Some(route) = cx.routes.get_mut(&self.request_id) else {
            // Ended by a reply (refused, done) or by the session.
            return Poll::Ready(Ok(()));
        };
        if route.ending.is_some() {
            // PUBLISH_DONE came: the trailing groups settle the route.
            return Poll::Ready(Ok(()));
        }
        // Nobody wants the track any more: after the linger, cancel upstream and end it
        // locally, unless a consumer took it meanwhile.
        if cx.poll_route_unused(self.request_id, waiter).is_ready() {
            tracing::debug!(
                request_id = self.request_id,
                "unsubscribing: nobody reads the track"
            );
            self.cancel(cx);
            return Poll::Ready(Ok(()));
        }
        let Some((writer, reader)) = self.stream.as_mut() else {
            return Poll::Pending;
        };
        if let Poll::Ready(Err(error)) = writer.poll_flush(waiter) {
            abort(cx, self.request_id, error);
            return Poll::Ready(Ok(()));
        }
        let draft = cx.moqt.as_ref().map_or(Draft::D18, |moqt| moqt.draft);
        loop {
            match reader.poll_message(waiter, |buf| Frame::decode(buf, draft)) {
                Poll::Ready(Ok(Some(frame))) => {
                    if !on_reply(Some(self.request_id), &frame, cx)? {
                        tracing::debug!(kind = frame.kind, "a message that answers no SUBSCRIBE");
                        return Poll::Ready(Err(Error::ProtocolViolation));
                    }
                    if !cx.routes.contains_key(&self.request_id) {
                        return Poll::Ready(Ok(()));
                    }
                }
                // The publisher's side ended without PUBLISH_DONE: the track ends as done.
                Poll::Ready(Ok(None)) => {
                    set_ending(cx, self.request_id, UNKNOWN_STREAM_COUNT);
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Err(ReadError::Stream(error))) => {
                    abort(cx, self.request_id, error);
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Err(ReadError::Malformed(error))) => {
                    abort(cx, self.request_id, error);
                    return Poll::Ready(Err(error));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Cancels the subscription upstream and ends its track.
    fn cancel(&mut self, cx: &mut Context) {
        match self.stream.as_mut() {
            Some((writer, reader)) => {
                writer.stream_mut().reset(RESET_CANCELLED);
                reader.stream_mut().stop(RESET_CANCELLED);
            }
            None => {
                if let Some(moqt) = cx.moqt.as_mut() {
                    let _ = moqt.send(&Unsubscribe {
                        request_id: self.request_id,
                    });
                }
            }
        }
        abort(cx, self.request_id, Error::Cancel);
    }
}

/// A reply from the publisher to one of this side's subscriptions: on 18 read from its
/// request stream (`stream_request`), on 14 and 16 from the control stream, naming its
/// request id. Whether `frame` is such a reply; one for a subscription already over is
/// ignored.
pub(super) fn on_reply(
    stream_request: Option<u64>,
    frame: &Frame,
    cx: &mut Context,
) -> Result<bool, Error> {
    let Some(moqt) = cx.moqt.as_mut() else {
        return Ok(false);
    };
    let draft = moqt.draft;
    let is = |kind: Option<u64>| kind == Some(frame.kind);
    // The subscription a reply names: its stream's, or the one it carries.
    let named = |carried: Option<u64>| stream_request.or(carried).ok_or(Error::ProtocolViolation);
    if is(SubscribeOk::message_type(draft)) {
        let ok = SubscribeOk::from_frame(frame, draft)?;
        let request_id = named(ok.request_id)?;
        if !cx.routes.contains_key(&request_id) {
            tracing::debug!(request_id, "SUBSCRIBE_OK of no subscription live");
            return Ok(true);
        }
        tracing::debug!(request_id, alias = ok.track_alias, "SUBSCRIBE_OK");
        // Aliases of routes that ended since (their trailing groups settled) go, in
        // batches: the map stays within a few times the live subscriptions.
        if moqt.aliases.len() > 2 * cx.routes.len() + 16 {
            moqt.aliases.retain(|_, id| cx.routes.contains_key(id));
        }
        moqt.aliases.insert(ok.track_alias, request_id);
        moqt.alias_news.update(|news| *news += 1);
        return Ok(true);
    }
    if is(SubscribeError::message_type(draft)) {
        let error = SubscribeError::from_frame(frame, draft)?;
        refused(cx, error.request_id, error.code, &error.reason);
        return Ok(true);
    }
    if is(RequestError::message_type(draft)) {
        let error = RequestError::from_frame(frame, draft)?;
        let request_id = named(error.request_id)?;
        refused(cx, request_id, error.code, &error.reason);
        return Ok(true);
    }
    if is(PublishDone::message_type(draft)) {
        let done = PublishDone::from_frame(frame, draft)?;
        let request_id = named(done.request_id)?;
        tracing::debug!(request_id, status = done.status, streams = done.stream_count, reason = %done.reason, "PUBLISH_DONE");
        set_ending(cx, request_id, done.stream_count);
        return Ok(true);
    }
    Ok(false)
}

/// The publisher refused the subscription: the track fails (a missing track as not found).
fn refused(cx: &mut Context, request_id: u64, code: u64, reason: &str) {
    tracing::debug!(request_id, code, reason, "the peer refused a subscription");
    let draft = cx.moqt.as_ref().map_or(Draft::D18, |moqt| moqt.draft);
    let does_not_exist = if draft == Draft::D14 { 0x4 } else { 0x10 };
    let error = match code {
        code if code == does_not_exist => Error::NotFound,
        0x1 => Error::Unauthorized,
        _ => Error::Remote(code),
    };
    abort(cx, request_id, error);
}

/// The publisher ended the subscription after `streams` data streams: the route waits
/// for those still in flight, or for the session's trailing wait.
fn set_ending(cx: &mut Context, request_id: u64, streams: u64) {
    let until = cx.now + cx.config.trailing_groups_timeout;
    if let Some(route) = cx.routes.get_mut(&request_id) {
        let expected = match streams {
            UNKNOWN_STREAM_COUNT => u64::MAX,
            streams => streams,
        };
        route.ending = Some(Ending { expected, until });
        route.linger = None;
    }
}

/// Ends subscription `request_id`'s track with `error` and forgets it.
fn abort(cx: &mut Context, request_id: u64, error: Error) {
    if let Some(route) = cx.routes.remove(&request_id) {
        route.track.abort(error);
    }
    if let Some(moqt) = cx.moqt.as_mut() {
        moqt.aliases.retain(|_, id| *id != request_id);
        moqt.alias_news.update(|news| *news += 1);
    }
}
