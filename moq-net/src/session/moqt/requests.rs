//! The peer's requests: which messages start one, the request-id rules each draft sets,
//! and the answer, on the stream the draft names: served (SUBSCRIBE, TRACK_STATUS,
//! SUBSCRIBE_NAMESPACE, PUBLISH_NAMESPACE) or refused (NOT_SUPPORTED for the rest).
//!
//! spec: § "Request ID" of each draft. On 14 and 16 the peer's request ids run in
//! sequence (the client's even from 0, the server's odd from 1, up by two), below this
//! side's MAX_REQUEST_ID grant: out of sequence is INVALID_REQUEST_ID, past the grant
//! TOO_MANY_REQUESTS. On 18, where each request has its own stream and streams arrive in
//! any order, only the parity and a repeat are errors (INVALID_REQUEST_ID).

use std::task::Poll;

use bytes::Bytes;
use moqx_kio::Waiter;

use super::{MAX_PENDING_REQUEST_IDS, MoqtState};
use crate::Error;
use crate::moqt::{
    Control, Draft, Fetch, FetchCancel, FetchError, Frame, MaxRequestId, Publish, PublishDone,
    PublishError, PublishNamespace, PublishNamespaceCancel, PublishNamespaceDone,
    PublishNamespaceError, Refused, RequestError, RequestUpdate, Subscribe, SubscribeError,
    SubscribeNamespace, SubscribeNamespaceError, SubscribeTracks, TrackStatus, TrackStatusError,
    Unsubscribe, UnsubscribeNamespace,
};
use crate::session::context::Context;
use crate::session::stream::{Reader, Writer};
use crate::session::task::Spawn;
use crate::transport::{RecvStream, SendStream};

/// Why a request of the peer's is refused, as each draft codes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refuse {
    /// This side does not serve this kind of request.
    NotSupported,
    /// No such track or namespace here.
    DoesNotExist,
    /// The session may not read or publish there.
    Unauthorized,
    /// A bound of the session: too many requests at once.
    ExcessiveLoad,
    /// This side takes no publications (it subscribes to nothing).
    Uninterested,
    /// What it waited for did not come in time (a SUBSCRIBE's rendezvous).
    Timeout,
    /// Anything else.
    Internal,
}

impl Refuse {
    /// What our error says about a request it failed.
    pub(super) fn from_error(error: Error) -> Self {
        match error {
            Error::NotFound => Refuse::DoesNotExist,
            Error::Unauthorized => Refuse::Unauthorized,
            Error::BoundsExceeded => Refuse::ExcessiveLoad,
            Error::Unsupported => Refuse::NotSupported,
            _ => Refuse::Internal,
        }
    }

    /// Its code on `draft` (14: the per-request codes, where TRACK_DOES_NOT_EXIST and
    /// NAMESPACE_PREFIX_UNKNOWN are both 0x4; 16 and 18: REQUEST_ERROR's).
    fn code(self, draft: Draft) -> u64 {
        match self {
            Refuse::Internal => 0x0,
            Refuse::Unauthorized => 0x1,
            Refuse::Timeout => 0x2,
            Refuse::NotSupported => 0x3,
            Refuse::DoesNotExist if draft == Draft::D14 => 0x4,
            Refuse::DoesNotExist => 0x10,
            // EXCESSIVE_LOAD is 18's; before it, an internal error that says why in words.
            Refuse::ExcessiveLoad if draft == Draft::D18 => 0x9,
            Refuse::ExcessiveLoad => 0x0,
            Refuse::Uninterested if draft == Draft::D14 => 0x4,
            Refuse::Uninterested => 0x20,
        }
    }

    /// Its words.
    fn reason(self) -> &'static str {
        match self {
            Refuse::NotSupported => "not supported by this endpoint",
            Refuse::Timeout => "no publisher in time",
            Refuse::DoesNotExist => "does not exist",
            Refuse::Unauthorized => "unauthorized",
            Refuse::ExcessiveLoad => "too many requests at once",
            Refuse::Uninterested => "this endpoint takes no publications",
            Refuse::Internal => "internal error",
        }
    }
}

/// A message that starts (or, for an update, changes) a request of the peer's.
#[derive(Debug)]
pub(super) enum Request {
    Subscribe(Subscribe),
    TrackStatus(TrackStatus),
    Fetch(Fetch),
    Publish(Publish),
    PublishNamespace(PublishNamespace),
    SubscribeNamespace(SubscribeNamespace),
    SubscribeTracks(SubscribeTracks),
    Update(RequestUpdate),
}

impl Request {
    /// The request `frame` carries on `draft`, `None` if its type starts none. A request
    /// that does not decode is the peer's protocol violation.
    pub(super) fn from_frame(frame: &Frame, draft: Draft) -> Result<Option<Self>, Error> {
        let is = |kind: Option<u64>| kind == Some(frame.kind);
        Ok(Some(if is(Subscribe::message_type(draft)) {
            Request::Subscribe(Subscribe::from_frame(frame, draft)?)
        } else if is(TrackStatus::message_type(draft)) {
            Request::TrackStatus(TrackStatus::from_frame(frame, draft)?)
        } else if is(Fetch::message_type(draft)) {
            Request::Fetch(Fetch::from_frame(frame, draft)?)
        } else if is(Publish::message_type(draft)) {
            Request::Publish(Publish::from_frame(frame, draft)?)
        } else if is(PublishNamespace::message_type(draft)) {
            Request::PublishNamespace(PublishNamespace::from_frame(frame, draft)?)
        } else if is(SubscribeNamespace::message_type(draft)) {
            Request::SubscribeNamespace(SubscribeNamespace::from_frame(frame, draft)?)
        } else if is(SubscribeTracks::message_type(draft)) {
            Request::SubscribeTracks(SubscribeTracks::from_frame(frame, draft)?)
        } else if is(RequestUpdate::message_type(draft)) {
            Request::Update(RequestUpdate::from_frame(frame, draft)?)
        } else {
            return Ok(None);
        }))
    }

    /// The request id it consumes.
    pub(super) fn request_id(&self) -> u64 {
        match self {
            Request::Subscribe(request) => request.request_id,
            Request::TrackStatus(request) => request.request_id,
            Request::Fetch(request) => request.request_id,
            Request::Publish(request) => request.request_id,
            Request::PublishNamespace(request) => request.request_id,
            Request::SubscribeNamespace(request) => request.request_id,
            Request::SubscribeTracks(request) => request.request_id,
            Request::Update(request) => request.request_id,
        }
    }

    /// Whether it is an update of an earlier request (not a request of its own stream on
    /// 18).
    pub(super) fn is_update(&self) -> bool {
        matches!(self, Request::Update(_))
    }

    /// Whether it is SUBSCRIBE_NAMESPACE (on 16 the one request on its own stream).
    pub(super) fn is_subscribe_namespace(&self) -> bool {
        matches!(self, Request::SubscribeNamespace(_))
    }

    /// The encoded refusal of this request on `draft`: REQUEST_ERROR from 16 on (with the
    /// request id on 16, on the request's own stream on 18), the request type's own error
    /// on 14; `None` for 14's SUBSCRIBE_UPDATE, which has no reply.
    pub(super) fn refusal(&self, draft: Draft, why: Refuse) -> Result<Option<Bytes>, Error> {
        let id = self.request_id();
        // 14 has no REQUEST_ERROR: each request type has an error message of its own.
        let encoded = if RequestError::message_type(draft).is_none() {
            match self {
                Request::Subscribe(_) => encode::<SubscribeError>(&refused(id, why, draft), draft),
                Request::TrackStatus(_) => {
                    encode::<TrackStatusError>(&refused(id, why, draft), draft)
                }
                Request::Fetch(_) => encode::<FetchError>(&refused(id, why, draft), draft),
                Request::Publish(_) => encode::<PublishError>(&refused(id, why, draft), draft),
                Request::PublishNamespace(_) => {
                    encode::<PublishNamespaceError>(&refused(id, why, draft), draft)
                }
                Request::SubscribeNamespace(_) => {
                    encode::<SubscribeNamespaceError>(&refused(id, why, draft), draft)
                }
                Request::SubscribeTracks(_) | Request::Update(_) => return Ok(None),
            }
        } else {
            let error = RequestError {
                request_id: draft.has_reply_request_ids().then_some(id),
                code: why.code(draft),
                retry_after: None,
                reason: why.reason().to_owned(),
                redirect: None,
            };
            encode(&error, draft)
        };
        encoded.map(Some)
    }
}

/// 14's refusal of request `request_id`, of the request type's own error message.
fn refused<const TYPE: u64>(request_id: u64, why: Refuse, draft: Draft) -> Refused<TYPE> {
    Refused {
        request_id,
        code: why.code(draft),
        reason: why.reason().to_owned(),
    }
}

/// `message`, encoded.
fn encode<C: Control>(message: &C, draft: Draft) -> Result<Bytes, Error> {
    message.to_vec(draft).map(Bytes::from).map_err(|error| {
        tracing::debug!(%error, message = C::NAME, "could not encode a reply");
        Error::Encode
    })
}

impl MoqtState {
    /// Checks the request id of the peer's new request against the draft's rules, and
    /// counts it.
    pub(super) fn take_request_id(&mut self, id: u64) -> Result<(), Error> {
        if self.draft.has_request_id_flow_control() {
            if id != self.next_peer_request_id {
                tracing::debug!(
                    id,
                    expected = self.next_peer_request_id,
                    "a request id out of sequence"
                );
                return Err(Error::InvalidRequestId);
            }
            if id >= self.max_request_id {
                tracing::debug!(
                    id,
                    granted = self.max_request_id,
                    "a request past the request ids granted"
                );
                return Err(Error::TooManyRequests);
            }
            self.next_peer_request_id += 2;
            return Ok(());
        }
        let parity = self.next_peer_request_id % 2;
        let seen = id < self.next_peer_request_id || self.pending_request_ids.contains(&id);
        if id % 2 != parity || seen {
            tracing::debug!(id, seen, "a request id of the wrong parity, or a repeat");
            return Err(Error::InvalidRequestId);
        }
        self.pending_request_ids.insert(id);
        // The contiguous run of ids seen grows; a peer leaving gaps past the bound has its
        // oldest forgotten (its ids below them then count as seen).
        if self.pending_request_ids.len() > MAX_PENDING_REQUEST_IDS
            && let Some(oldest) = self.pending_request_ids.first().copied()
        {
            self.next_peer_request_id = oldest;
        }
        while self.pending_request_ids.remove(&self.next_peer_request_id) {
            self.next_peer_request_id += 2;
        }
        Ok(())
    }

    /// A request of the peer's ended: on 14 and 16, once half the window's ids are free
    /// again, MAX_REQUEST_ID grants them back.
    pub(super) fn request_done(&mut self) -> Result<(), Error> {
        if !self.draft.has_request_id_flow_control() {
            return Ok(());
        }
        self.freed_request_ids += 2;
        if self.freed_request_ids * 2 < self.request_window {
            return Ok(());
        }
        self.max_request_id += std::mem::take(&mut self.freed_request_ids);
        let grant = MaxRequestId {
            request_id: self.max_request_id,
        };
        self.send(&grant)
    }
}

/// A control message of 14 or 16 after SETUP that is not GOAWAY or request-id flow
/// control: a request (served, or refused), the end of one (nothing to end: ignored),
/// or a reply, which answers nothing this side asked (a protocol violation).
pub(super) fn on_control_stream(frame: Frame, cx: &mut Context) -> Result<(), Error> {
    let moqt = cx.moqt.as_mut().ok_or(Error::ProtocolViolation)?;
    let draft = moqt.draft;
    if let Some(request) = Request::from_frame(&frame, draft)? {
        if request.is_subscribe_namespace() && draft.has_subscribe_namespace_stream() {
            tracing::debug!("SUBSCRIBE_NAMESPACE on the control stream, not its own");
            return Err(Error::ProtocolViolation);
        }
        moqt.take_request_id(request.request_id())?;
        let why = match &request {
            Request::Subscribe(_) | Request::TrackStatus(_) => {
                let planned = match &request {
                    Request::TrackStatus(status) => super::serve::plan(status, cx),
                    Request::Subscribe(subscribe) => super::serve::plan(subscribe, cx),
                    _ => Err(Refuse::Internal),
                };
                match planned {
                    Ok(subscription) => {
                        cx.spawned.push(Spawn::MoqtSubscribe(subscription));
                        return Ok(());
                    }
                    Err(why) => why,
                }
            }
            Request::SubscribeNamespace(subscribe) => {
                match super::Announcements::solicited(&subscribe.prefix, cx) {
                    Ok(announcements) => {
                        let ok = crate::moqt::SubscribeNamespaceOk {
                            request_id: subscribe.request_id,
                        };
                        let moqt = cx.moqt.as_mut().ok_or(Error::ProtocolViolation)?;
                        moqt.send(&ok)?;
                        cx.spawned.push(Spawn::MoqtAnnounce(announcements));
                        return Ok(());
                    }
                    Err(why) => why,
                }
            }
            Request::PublishNamespace(publish) => match super::namespaces::accept(publish, cx) {
                Ok((_, ok)) => {
                    // Its request id stays taken until the peer withdraws it.
                    cx.moqt.as_mut().ok_or(Error::ProtocolViolation)?.queue(ok);
                    return Ok(());
                }
                Err(why) => why,
            },
            _ => Refuse::NotSupported,
        };
        tracing::debug!(?request, ?why, "refusing the peer's request");
        let moqt = cx.moqt.as_mut().ok_or(Error::ProtocolViolation)?;
        if let Some(refusal) = request.refusal(draft, why)? {
            moqt.queue(refusal);
        }
        return moqt.request_done();
    }
    if Some(frame.kind) == PublishNamespaceDone::message_type(draft) {
        let done = PublishNamespaceDone::from_frame(&frame, draft)?;
        super::namespaces::on_done(done, cx);
        return Ok(());
    }
    if super::upstream::on_reply(None, &frame, cx)? {
        return Ok(());
    }
    if super::discovery::on_control_reply(&frame, draft)? {
        return Ok(());
    }
    if Some(frame.kind) == UnsubscribeNamespace::message_type(draft) {
        let unsubscribe = UnsubscribeNamespace::from_frame(&frame, draft)?;
        if let Some(moqt) = cx.moqt.as_mut() {
            moqt.unsubscribe_namespace(&unsubscribe.prefix);
        }
        return Ok(());
    }
    let moqt = cx.moqt.as_mut().ok_or(Error::ProtocolViolation)?;
    if Some(frame.kind) == Unsubscribe::message_type(draft) {
        let unsubscribe = Unsubscribe::from_frame(&frame, draft)?;
        moqt.unsubscribe(unsubscribe.request_id);
        return Ok(());
    }
    if is_request_end(frame.kind, draft) {
        tracing::debug!(
            kind = frame.kind,
            "the peer ended a request this side refused"
        );
        return Ok(());
    }
    tracing::debug!(
        kind = frame.kind,
        "a control message that answers no request of this side, or of unknown type"
    );
    Err(Error::ProtocolViolation)
}

/// Whether `kind` ends a request (14, 16): UNSUBSCRIBE, FETCH_CANCEL, PUBLISH_DONE,
/// PUBLISH_NAMESPACE_DONE / _CANCEL, 14's UNSUBSCRIBE_NAMESPACE.
fn is_request_end(kind: u64, draft: Draft) -> bool {
    [
        Unsubscribe::message_type(draft),
        FetchCancel::message_type(draft),
        PublishDone::message_type(draft),
        PublishNamespaceDone::message_type(draft),
        PublishNamespaceCancel::message_type(draft),
        UnsubscribeNamespace::message_type(draft),
    ]
    .contains(&Some(kind))
}

/// A request the peer opened a stream for (18's every request, 16's SUBSCRIBE_NAMESPACE),
/// refused on it: the refusal and FIN go out, and what the peer sends after is read and
/// dropped until its side ends.
pub(crate) struct RequestRefuse<S, R> {
    writer: Writer<S>,
    reader: Reader<R>,
    finished: bool,
}

impl<S: SendStream, R: RecvStream> RequestRefuse<S, R> {
    pub(crate) fn new(mut writer: Writer<S>, reader: Reader<R>, refusal: Bytes) -> Self {
        writer.queue(refusal);
        Self {
            writer,
            reader,
            finished: false,
        }
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        if !self.finished {
            match self.writer.poll_flush(waiter) {
                Poll::Ready(Ok(())) => {
                    let _ = self.writer.stream_mut().finish();
                    self.finished = true;
                    if let Some(moqt) = cx.moqt.as_mut() {
                        moqt.request_done()?;
                    }
                }
                // The peer gave the request up: nothing more to say on it.
                Poll::Ready(Err(_)) => {
                    self.finished = true;
                    if let Some(moqt) = cx.moqt.as_mut() {
                        moqt.request_done()?;
                    }
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        loop {
            match self.reader.poll_fill(waiter) {
                Poll::Ready(Ok(())) if self.reader.is_finished() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => drop(self.reader.take_buffer()),
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{SessionConfig, Side};

    fn state(draft: Draft, requests: usize) -> MoqtState {
        let mut config = SessionConfig::default();
        config.limits.max_subscriptions = requests;
        config.limits.max_announce_requests = 0;
        MoqtState::new(draft, Side::Server, &config)
    }

    #[test]
    fn a_request_past_the_grant_is_too_many_and_a_gap_is_invalid() {
        for draft in [Draft::D14, Draft::D16] {
            let mut moqt = state(draft, 2);
            assert_eq!(moqt.max_request_id(), 4, "two of the client's ids: 0 and 2");
            assert_eq!(moqt.take_request_id(0), Ok(()));
            assert_eq!(moqt.take_request_id(2), Ok(()));
            assert_eq!(moqt.take_request_id(4), Err(Error::TooManyRequests));
            let mut moqt = state(draft, 2);
            assert_eq!(moqt.take_request_id(2), Err(Error::InvalidRequestId));
            assert_eq!(moqt.take_request_id(1), Err(Error::InvalidRequestId));
        }
    }

    #[test]
    fn ids_freed_come_back_once_half_the_window_is_free() {
        let mut moqt = state(Draft::D16, 2);
        moqt.take_request_id(0).unwrap();
        moqt.request_done().unwrap();
        assert_eq!(
            moqt.max_request_id(),
            6,
            "one of two requests ended: its id granted again"
        );
        assert_eq!(moqt.take_outbox(None).len(), 1, "MAX_REQUEST_ID queued");
    }

    #[test]
    fn on_18_requests_may_arrive_out_of_order_but_never_twice() {
        let mut moqt = state(Draft::D18, 2);
        assert_eq!(moqt.take_request_id(4), Ok(()));
        assert_eq!(moqt.take_request_id(0), Ok(()));
        assert_eq!(moqt.take_request_id(2), Ok(()));
        assert_eq!(moqt.first_unprocessed_request_id(), 6);
        for id in [0, 2, 4] {
            assert_eq!(moqt.take_request_id(id), Err(Error::InvalidRequestId));
        }
        assert_eq!(
            moqt.take_request_id(7),
            Err(Error::InvalidRequestId),
            "odd: the server's"
        );
        moqt.request_done().unwrap();
        assert!(moqt.take_outbox(None).is_empty(), "no grants on 18");
    }

    #[test]
    fn on_18_the_ids_remembered_out_of_order_are_bounded() {
        let mut moqt = state(Draft::D18, 2);
        for index in 1..=(MAX_PENDING_REQUEST_IDS as u64 + 10) {
            moqt.take_request_id(index * 2).unwrap();
        }
        assert!(moqt.pending_request_ids.len() <= MAX_PENDING_REQUEST_IDS);
        assert_eq!(
            moqt.take_request_id(0),
            Err(Error::InvalidRequestId),
            "the gap the peer left is forgotten as seen"
        );
    }
}
