//! Namespace discovery on moq-transport, both ways.
//!
//! **This side's broadcasts** ([`SessionConfig::publish`](crate::session::SessionConfig::publish))
//! are announced by an [`Announcer`] that follows the origin: unsolicited as a client
//! publisher (PUBLISH_NAMESPACE for each broadcast, as deployed publishers do), or in
//! answer to the peer's SUBSCRIBE_NAMESPACE (a relay telling its subscribers what there
//! is). Where each draft puts them:
//!
//! - 14 and 16, unsolicited, and 14 in answer: PUBLISH_NAMESPACE with this side's request
//!   ids on the control stream, PUBLISH_NAMESPACE_DONE when a broadcast ends;
//! - 16 and 18 in answer: NAMESPACE and NAMESPACE_DONE (the fields after the prefix) on
//!   the SUBSCRIBE_NAMESPACE's own stream;
//! - 18, unsolicited: each PUBLISH_NAMESPACE on a request stream of its own
//!   ([`Publication`]), reset to withdraw it.
//!
//! **The peer's broadcasts**, for a client that subscribes: SUBSCRIBE_NAMESPACE for
//! [`SessionConfig::subscribe_prefix`](crate::session::SessionConfig::subscribe_prefix)
//! (on 14 on the control stream: the peer answers with PUBLISH_NAMESPACE, which
//! `namespaces.rs` accepts; from 16 on its own stream, read by [`NamespaceFollow`]).

use std::collections::HashMap;
use std::task::Poll;

use bytes::Bytes;
use moqx_kio::Waiter;

use super::names;
use super::namespaces::{self, Accepted};
use super::request_stream::{StreamEnd, poll_until_end};
use super::requests::Refuse;
use crate::Error;
use crate::model::{Announced, Announcement, Path};
use crate::moqt::{
    Control, Draft, Frame, Namespace, NamespaceAnnounced, NamespaceDone, Publication as Withdrawn,
    PublishNamespace, PublishNamespaceCancel, PublishNamespaceDone, PublishNamespaceError,
    PublishNamespaceOk, RequestError, RequestOk, SubscribeNamespace, SubscribeNamespaceError,
    SubscribeNamespaceOk, SubscribeOptions,
};
use crate::session::context::Context;
use crate::session::stream::{ReadError, Reader, Writer};
use crate::session::task::Open;
use crate::transport::{RecvStream, SendStream};

/// Follows an origin and tells the peer of its broadcasts.
pub(crate) struct Announcer<S, R> {
    core: Announcements,
    /// 16, 18 in answer to SUBSCRIBE_NAMESPACE: its stream.
    stream: Option<(Writer<S>, Reader<R>)>,
}

/// What an announcer follows and how it tells the peer, whatever carries it.
pub(crate) struct Announcements {
    /// In answer to the peer: counts against the session's bound on announce requests.
    _slot: Option<crate::session::publisher::RequestSlot>,
    announced: Announced,
    /// How many namespace fields the prefix asked for has: NAMESPACE carries the rest.
    prefix_fields: usize,
    sink: Sink,
    /// 14: the peer's UNSUBSCRIBE_NAMESPACE ends a solicited announcer.
    unsubscribed: Option<moqx_kio::Consumer<bool>>,
}

/// Where announcements go.
enum Sink {
    /// PUBLISH_NAMESPACE and its DONE on the control stream (14, 16), by path: the
    /// request id each went with.
    Control(HashMap<Path, u64>),
    /// NAMESPACE and NAMESPACE_DONE on the announcer's stream (16, 18).
    Stream,
    /// 18: a request stream per namespace, by path: the flag that withdraws it.
    Requests(HashMap<Path, moqx_kio::Producer<bool>>),
}

/// 18: one PUBLISH_NAMESPACE on its request stream, until withdrawn.
pub(crate) struct Publication<S, R> {
    writer: Writer<S>,
    reader: Reader<R>,
    withdrawn: moqx_kio::Consumer<bool>,
}

/// 18: a PUBLISH_NAMESPACE waiting for its stream.
pub(crate) struct PublicationPlan {
    message: Bytes,
    withdrawn: moqx_kio::Consumer<bool>,
}

/// A client's SUBSCRIBE_NAMESPACE on its own stream (16, 18): the namespaces the peer
/// says it has become broadcasts here.
pub(crate) struct NamespaceFollow<S, R> {
    writer: Writer<S>,
    reader: Reader<R>,
    prefix: Path,
    /// The broadcasts published from this stream, by path.
    accepted: HashMap<Path, Accepted>,
}

/// 16, 18: a SUBSCRIBE_NAMESPACE waiting for its stream.
pub(crate) struct NamespaceFollowPlan {
    message: Bytes,
    prefix: Path,
}

impl Announcements {
    /// A client publisher's announcements of `config.publish`, unsolicited.
    pub(crate) fn unsolicited(cx: &Context) -> Option<Self> {
        let draft = cx.moqt.as_ref()?.draft;
        let origin = cx.config.publish.as_ref()?;
        Some(Self {
            _slot: None,
            announced: origin.announced(Path::root()),
            prefix_fields: 0,
            sink: match draft.has_request_streams() {
                true => Sink::Requests(HashMap::new()),
                false => Sink::Control(HashMap::new()),
            },
            unsubscribed: None,
        })
    }

    /// Announcements in answer to the peer's SUBSCRIBE_NAMESPACE for `prefix` (on the
    /// control stream on 14, on its own stream from 16), within the session's bound on
    /// announce requests: each one follows the origin, at a cost per announcement.
    pub(super) fn solicited(prefix: &Namespace, cx: &mut Context) -> Result<Self, Refuse> {
        let moqt = cx.moqt.as_mut().ok_or(Refuse::Internal)?;
        let draft = moqt.draft;
        let origin = cx.config.publish.as_ref().ok_or(Refuse::NotSupported)?;
        let path = names::path_of(prefix).ok_or(Refuse::DoesNotExist)?;
        let Some(slot) = crate::session::publisher::RequestSlot::take(
            &cx.announce_requests,
            cx.config.limits.max_announce_requests,
        ) else {
            cx.counters.announce_requests_refused += 1;
            return Err(Refuse::ExcessiveLoad);
        };
        let unsubscribed = (!draft.has_subscribe_namespace_stream())
            .then(|| moqt.watch_unsubscribe_namespace(prefix));
        Ok(Self {
            _slot: Some(slot),
            announced: origin.announced(path),
            prefix_fields: prefix.0.len(),
            sink: match draft.has_subscribe_namespace_stream() {
                true => Sink::Stream,
                false => Sink::Control(HashMap::new()),
            },
            unsubscribed,
        })
    }
}

impl<S: SendStream, R: RecvStream> Announcer<S, R> {
    /// Announcements that need no stream of their own.
    pub(crate) fn without_stream(core: Announcements) -> Self {
        Self { core, stream: None }
    }

    /// Announcements on the SUBSCRIBE_NAMESPACE's stream, after `ok`.
    pub(super) fn on_stream(
        core: Announcements,
        mut writer: Writer<S>,
        reader: Reader<R>,
        ok: Bytes,
    ) -> Self {
        writer.queue(ok);
        Self {
            core,
            stream: Some((writer, reader)),
        }
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        let draft = cx.moqt.as_ref().ok_or(Error::ProtocolViolation)?.draft;
        if let Some(unsubscribed) = &self.core.unsubscribed
            && !matches!(
                unsubscribed.poll_until(waiter, |done| done.then_some(())),
                Poll::Pending
            )
        {
            return Poll::Ready(Ok(()));
        }
        if let Some((_, reader)) = self.stream.as_mut() {
            // The subscriber ends its SUBSCRIBE_NAMESPACE by ending the stream.
            let end = poll_until_end(reader, waiter, draft, |frame| {
                tracing::debug!(
                    kind = frame.kind,
                    "a message on a SUBSCRIBE_NAMESPACE stream, not applied"
                );
                Ok(())
            });
            match end {
                Poll::Ready(StreamEnd::Finished | StreamEnd::Reset) => {
                    if let Some((writer, _)) = self.stream.as_mut() {
                        let _ = writer.stream_mut().finish();
                    }
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(StreamEnd::Malformed(error)) => return Poll::Ready(Err(error)),
                Poll::Pending => {}
            }
        }
        while let Poll::Ready(announcement) = self.core.announced.poll_next(waiter) {
            self.announce(announcement, draft, cx)?;
        }
        if let Some((writer, _)) = self.stream.as_mut()
            && let Poll::Ready(Err(_)) = writer.poll_flush(waiter)
        {
            return Poll::Ready(Ok(()));
        }
        Poll::Pending
    }

    /// Tells the peer of one change.
    fn announce(
        &mut self,
        announcement: Announcement,
        draft: Draft,
        cx: &mut Context,
    ) -> Result<(), Error> {
        let (path, active) = match announcement {
            Announcement::Active { path, .. } => (path, true),
            Announcement::Ended { path } => (path, false),
        };
        tracing::debug!(%path, active, "announcing to the peer");
        let namespace = names::namespace_of(&path);
        let moqt = cx.moqt.as_mut().ok_or(Error::ProtocolViolation)?;
        match &mut self.core.sink {
            Sink::Control(published) if active => {
                if published.contains_key(&path) {
                    return Ok(()); // a new route to a path announced: nothing new to say
                }
                let Some(request_id) = moqt.take_own_request_id() else {
                    tracing::debug!(%path, "no request id left to announce a namespace");
                    return Ok(());
                };
                published.insert(path, request_id);
                moqt.send(&PublishNamespace {
                    request_id,
                    namespace,
                    ..PublishNamespace::default()
                })
            }
            Sink::Control(published) => {
                let Some(request_id) = published.remove(&path) else {
                    return Ok(());
                };
                let publication = match draft {
                    Draft::D14 => Withdrawn::Namespace(namespace),
                    _ => Withdrawn::Request(request_id),
                };
                moqt.send(&PublishNamespaceDone { publication })
            }
            Sink::Stream => {
                let suffix = Namespace(
                    namespace
                        .0
                        .into_iter()
                        .skip(self.core.prefix_fields)
                        .collect(),
                );
                let bytes = match active {
                    true => NamespaceAnnounced { suffix }.to_vec(draft),
                    false => NamespaceDone { suffix }.to_vec(draft),
                }
                .map_err(|_| Error::Encode)?;
                if let Some((writer, _)) = self.stream.as_mut() {
                    writer.queue(Bytes::from(bytes));
                }
                Ok(())
            }
            Sink::Requests(published) if active => {
                if published.contains_key(&path) {
                    return Ok(());
                }
                let Some(request_id) = moqt.take_own_request_id() else {
                    return Ok(());
                };
                let message = PublishNamespace {
                    request_id,
                    namespace,
                    ..PublishNamespace::default()
                }
                .to_vec(draft)
                .map_err(|_| Error::Encode)?;
                let flag = moqx_kio::Producer::new(false);
                cx.opens.push_back(Open::MoqtPublication(PublicationPlan {
                    message: Bytes::from(message),
                    withdrawn: flag.consume(),
                }));
                published.insert(path, flag);
                Ok(())
            }
            Sink::Requests(published) => {
                if let Some(flag) = published.remove(&path) {
                    flag.update(|withdrawn| *withdrawn = true);
                }
                Ok(())
            }
        }
    }
}

impl Drop for Announcements {
    fn drop(&mut self) {
        // 18: the publications go with their announcer (the session ending).
        if let Sink::Requests(published) = &self.sink {
            for flag in published.values() {
                flag.update(|withdrawn| *withdrawn = true);
            }
        }
    }
}

impl PublicationPlan {
    pub(crate) fn with_streams<S: SendStream, R: RecvStream>(
        self,
        send: S,
        recv: R,
        cx: &Context,
    ) -> Publication<S, R> {
        let mut writer = Writer::new(send);
        writer.queue(self.message);
        Publication {
            writer,
            reader: Reader::new(recv, cx.config.limits.max_message_bytes),
            withdrawn: self.withdrawn,
        }
    }
}

impl<S: SendStream, R: RecvStream> Publication<S, R> {
    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        let withdrawn = self
            .withdrawn
            .poll_until(waiter, |withdrawn| withdrawn.then_some(()));
        if !matches!(withdrawn, Poll::Pending) {
            self.writer.stream_mut().reset(super::RESET_CANCELLED);
            self.reader.stream_mut().stop(super::RESET_CANCELLED);
            return Poll::Ready(Ok(()));
        }
        if let Poll::Ready(Err(_)) = self.writer.poll_flush(waiter) {
            return Poll::Ready(Ok(()));
        }
        let draft = cx.moqt.as_ref().map_or(Draft::D18, |moqt| moqt.draft);
        let end = poll_until_end(&mut self.reader, waiter, draft, |frame| {
            if Some(frame.kind) == RequestError::message_type(draft) {
                let error = RequestError::from_frame(&frame, draft)?;
                tracing::debug!(code = error.code, reason = %error.reason, "the peer refused a namespace");
            } else {
                tracing::debug!(kind = frame.kind, "the peer answered a namespace");
            }
            Ok(())
        });
        match end {
            Poll::Ready(StreamEnd::Finished | StreamEnd::Reset) => Poll::Ready(Ok(())),
            Poll::Ready(StreamEnd::Malformed(error)) => Poll::Ready(Err(error)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A client subscriber asks the peer for its namespaces under the session's prefix: on 14
/// on the control stream, from 16 on a stream of its own (opened here).
pub(crate) fn follow(cx: &mut Context) -> Result<(), Error> {
    let Some(moqt) = cx.moqt.as_mut() else {
        return Ok(());
    };
    let draft = moqt.draft;
    let prefix = cx.config.subscribe_prefix.clone();
    if prefix.is_root() && !draft.has_empty_prefix() {
        // 14's prefix has at least one field: it cannot ask for every namespace. Such a
        // client learns what the server publishes to it unsolicited, nothing more.
        tracing::warn!("moq-transport 14 cannot ask for every namespace: set a subscribe prefix");
        return Ok(());
    }
    let Some(request_id) = moqt.take_own_request_id() else {
        return Ok(());
    };
    let message = SubscribeNamespace {
        request_id,
        prefix: names::namespace_of(&prefix),
        options: draft
            .has_subscribe_options()
            .then_some(SubscribeOptions::Namespace),
        ..SubscribeNamespace::default()
    };
    tracing::debug!(%prefix, request_id, "asking the peer for its namespaces");
    if !draft.has_subscribe_namespace_stream() {
        return moqt.send(&message);
    }
    let message = message.to_vec(draft).map_err(|_| Error::Encode)?;
    cx.opens
        .push_back(Open::MoqtNamespaceFollow(NamespaceFollowPlan {
            message: Bytes::from(message),
            prefix,
        }));
    Ok(())
}

impl NamespaceFollowPlan {
    pub(crate) fn with_streams<S: SendStream, R: RecvStream>(
        self,
        send: S,
        recv: R,
        cx: &Context,
    ) -> NamespaceFollow<S, R> {
        let mut writer = Writer::new(send);
        writer.queue(self.message);
        NamespaceFollow {
            writer,
            reader: Reader::new(recv, cx.config.limits.max_message_bytes),
            prefix: self.prefix,
            accepted: HashMap::new(),
        }
    }
}

impl<S: SendStream, R: RecvStream> NamespaceFollow<S, R> {
    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        if let Poll::Ready(Err(_)) = self.writer.poll_flush(waiter) {
            self.end(cx);
            return Poll::Ready(Ok(()));
        }
        let draft = cx.moqt.as_ref().ok_or(Error::ProtocolViolation)?.draft;
        loop {
            let frame = match self
                .reader
                .poll_message(waiter, |buf| Frame::decode(buf, draft))
            {
                Poll::Ready(Ok(Some(frame))) => frame,
                Poll::Ready(Ok(None)) | Poll::Ready(Err(ReadError::Stream(_))) => {
                    self.end(cx);
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Err(ReadError::Malformed(error))) => {
                    self.end(cx);
                    return Poll::Ready(Err(error));
                }
                Poll::Pending => return Poll::Pending,
            };
            let is = |kind: Option<u64>| kind == Some(frame.kind);
            if is(NamespaceAnnounced::message_type(draft)) {
                let notice = NamespaceAnnounced::from_frame(&frame, draft)?;
                let Some(path) = self.path(&notice.suffix) else {
                    continue;
                };
                match namespaces::publish_remote(&path, cx) {
                    Ok(generation) => {
                        self.accepted
                            .insert(path.clone(), Accepted { path, generation });
                    }
                    Err(why) => tracing::debug!(%path, ?why, "not following a namespace"),
                }
            } else if is(NamespaceDone::message_type(draft)) {
                let notice = NamespaceDone::from_frame(&frame, draft)?;
                if let Some(accepted) = self
                    .path(&notice.suffix)
                    .and_then(|path| self.accepted.remove(&path))
                {
                    namespaces::withdraw(&accepted, cx);
                }
            } else if is(RequestOk::message_type(draft)) {
                tracing::debug!("the peer accepted SUBSCRIBE_NAMESPACE");
            } else if is(RequestError::message_type(draft)) {
                let error = RequestError::from_frame(&frame, draft)?;
                tracing::debug!(code = error.code, reason = %error.reason, "the peer refused SUBSCRIBE_NAMESPACE");
            } else {
                tracing::debug!(
                    kind = frame.kind,
                    "a message out of place on a SUBSCRIBE_NAMESPACE stream"
                );
                return Poll::Ready(Err(Error::ProtocolViolation));
            }
        }
    }

    /// The broadcast path of a namespace the peer named by its fields after the prefix.
    fn path(&self, suffix: &Namespace) -> Option<Path> {
        let suffix = names::path_of(suffix)?;
        Some(match self.prefix.is_root() {
            true => suffix,
            false => self.prefix.join(suffix.as_str()),
        })
    }

    /// The stream ended: what it published goes.
    fn end(&mut self, cx: &mut Context) {
        for (_, accepted) in self.accepted.drain() {
            namespaces::withdraw(&accepted, cx);
        }
    }
}

/// Replies on the control stream (14, 16) to this side's namespace requests, and the
/// peer's PUBLISH_NAMESPACE_CANCEL: nothing to act on but the log. Whether `frame` is one.
pub(super) fn on_control_reply(frame: &Frame, draft: Draft) -> Result<bool, Error> {
    let is = |kind: Option<u64>| kind == Some(frame.kind);
    if is(PublishNamespaceOk::message_type(draft))
        || is(SubscribeNamespaceOk::message_type(draft))
        || is(RequestOk::message_type(draft))
    {
        tracing::debug!(kind = frame.kind, "the peer accepted a namespace request");
        return Ok(true);
    }
    if is(PublishNamespaceError::message_type(draft)) {
        let error = PublishNamespaceError::from_frame(frame, draft)?;
        tracing::debug!(code = error.code, reason = %error.reason, "the peer refused PUBLISH_NAMESPACE");
        return Ok(true);
    }
    if is(SubscribeNamespaceError::message_type(draft)) {
        let error = SubscribeNamespaceError::from_frame(frame, draft)?;
        tracing::debug!(code = error.code, reason = %error.reason, "the peer refused SUBSCRIBE_NAMESPACE");
        return Ok(true);
    }
    if is(PublishNamespaceCancel::message_type(draft)) {
        let cancel = PublishNamespaceCancel::from_frame(frame, draft)?;
        tracing::debug!(code = cancel.code, reason = %cancel.reason, "the peer cancelled a namespace this side published");
        return Ok(true);
    }
    Ok(false)
}
