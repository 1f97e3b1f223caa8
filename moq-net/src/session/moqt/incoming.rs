//! Streams the peer opens on a moq-transport session, until their first bytes say what
//! they are.
//!
//! - **Unidirectional**: 18's control stream (SETUP, `0x2F00`); a subgroup or FETCH data
//!   stream, or 18's padding, which this side asked for none of and stops (CANCELLED);
//!   any other type is a protocol violation (18: "an unknown stream type ... MUST close
//!   the session").
//! - **Bidirectional**: on 14 and 16 the client's control stream (CLIENT_SETUP first,
//!   once); on 16 a SUBSCRIBE_NAMESPACE of its own; on 18 a request of its own. Anything
//!   else first is a protocol violation.

use std::task::Poll;

use super::requests::{Refuse, Request};
use super::{
    Announcer, ControlStream, MoqtGroupRead, MoqtSubscribeServe, NamespaceStream, RESET_CANCELLED,
    RequestRefuse,
};
use crate::Error;
use crate::moqt::{
    ClientSetup, Control, FETCH_HEADER, Frame, PADDING_STREAM, SubgroupHeader, int::read_int,
};
use crate::session::Side;
use crate::session::context::Context;
use crate::session::stream::{ReadError, Reader, Writer};
use crate::session::task::{Step, Task};
use crate::transport::{self, RecvStream, SendStream};
use moqx_kio::Waiter;

/// A unidirectional stream the peer opened, until its type is read.
pub(crate) struct MoqtUniIncoming<R> {
    reader: Option<Reader<R>>,
}

impl<R: RecvStream> MoqtUniIncoming<R> {
    pub(crate) fn new(stream: R, limit: usize) -> Self {
        Self {
            reader: Some(Reader::new(stream, limit)),
        }
    }

    pub(crate) fn poll<T>(
        &mut self,
        waiter: &Waiter,
        cx: &mut Context,
    ) -> Poll<Result<Step<T>, Error>>
    where
        T: transport::Session<RecvStream = R>,
    {
        let Some(reader) = self.reader.as_mut() else {
            return Poll::Ready(Ok(Step::Done));
        };
        let draft = cx.moqt.as_ref().ok_or(Error::ProtocolViolation)?.draft;
        // The type is read without taking it: 18's SETUP frame begins with it.
        let kind = match reader.poll_message(waiter, |buf| read_int(&mut &buf[..], draft)) {
            Poll::Ready(Ok(Some(kind))) => kind,
            Poll::Ready(Ok(None)) | Poll::Ready(Err(ReadError::Stream(_))) => {
                return Poll::Ready(Ok(Step::Done));
            }
            Poll::Ready(Err(ReadError::Malformed(error))) => return Poll::Ready(Err(error)),
            Poll::Pending => return Poll::Pending,
        };
        let Some(mut reader) = self.reader.take() else {
            return Poll::Ready(Ok(Step::Done));
        };
        if draft.has_request_streams() && Some(kind) == ClientSetup::message_type(draft) {
            // 18: the peer's control stream (one; a second is its protocol violation).
            let moqt = cx.moqt.as_mut().ok_or(Error::ProtocolViolation)?;
            if std::mem::replace(&mut moqt.control_accepted, true) {
                tracing::debug!("a second control stream from the peer");
                return Poll::Ready(Err(Error::ProtocolViolation));
            }
            return Poll::Ready(Ok(Step::Become(Box::new(Task::MoqtControl(
                ControlStream::receiver(reader),
            )))));
        }
        let data = SubgroupHeader::is_subgroup_type(kind, draft)
            || kind == FETCH_HEADER
            || (draft.has_request_streams() && kind == PADDING_STREAM);
        if !data {
            tracing::debug!(kind, "a unidirectional stream of unknown type");
            return Poll::Ready(Err(Error::ProtocolViolation));
        }
        if SubgroupHeader::is_subgroup_type(kind, draft) {
            return Poll::Ready(Ok(Step::Become(Box::new(Task::MoqtGroupRead(
                MoqtGroupRead::new(reader, draft, cx),
            )))));
        }
        tracing::debug!(kind, "stopping a data stream this side did not ask for");
        reader.stream_mut().stop(RESET_CANCELLED);
        Poll::Ready(Ok(Step::Done))
    }
}

/// A bidirectional stream the peer opened, until its first message is read.
pub(crate) struct MoqtBidiIncoming<S, R> {
    streams: Option<(Writer<S>, Reader<R>)>,
}

impl<S: SendStream, R: RecvStream> MoqtBidiIncoming<S, R> {
    pub(crate) fn new(send: S, recv: R, limit: usize) -> Self {
        Self {
            streams: Some((Writer::new(send), Reader::new(recv, limit))),
        }
    }

    pub(crate) fn poll<T>(
        &mut self,
        waiter: &Waiter,
        cx: &mut Context,
    ) -> Poll<Result<Step<T>, Error>>
    where
        T: transport::Session<SendStream = S, RecvStream = R>,
    {
        let Some((_, reader)) = self.streams.as_mut() else {
            return Poll::Ready(Ok(Step::Done));
        };
        let draft = cx.moqt.as_ref().ok_or(Error::ProtocolViolation)?.draft;
        let frame = match reader.poll_message(waiter, |buf| Frame::decode(buf, draft)) {
            Poll::Ready(Ok(Some(frame))) => frame,
            Poll::Ready(Ok(None)) | Poll::Ready(Err(ReadError::Stream(_))) => {
                return Poll::Ready(Ok(Step::Done));
            }
            Poll::Ready(Err(ReadError::Malformed(error))) => return Poll::Ready(Err(error)),
            Poll::Pending => return Poll::Pending,
        };
        let Some((writer, reader)) = self.streams.take() else {
            return Poll::Ready(Ok(Step::Done));
        };
        let control_stream = !draft.has_request_streams()
            && cx.side == Side::Server
            && Some(frame.kind) == ClientSetup::message_type(draft);
        if control_stream {
            let moqt = cx.moqt.as_mut().ok_or(Error::ProtocolViolation)?;
            if std::mem::replace(&mut moqt.control_accepted, true) {
                tracing::debug!("a second control stream from the client");
                return Poll::Ready(Err(Error::ProtocolViolation));
            }
            let setup = ClientSetup::from_frame(&frame, draft)?;
            let control = ControlStream::server(writer, reader, setup, cx)?;
            return Poll::Ready(Ok(Step::Become(Box::new(Task::MoqtControl(control)))));
        }
        let own_stream = |request: &Request| {
            (draft.has_request_streams() && !request.is_update())
                || (draft.has_subscribe_namespace_stream() && request.is_subscribe_namespace())
        };
        let request = match Request::from_frame(&frame, draft)? {
            Some(request) if own_stream(&request) => request,
            _ => {
                tracing::debug!(
                    kind = frame.kind,
                    "a bidirectional stream that opens with no request"
                );
                return Poll::Ready(Err(Error::ProtocolViolation));
            }
        };
        let moqt = cx.moqt.as_mut().ok_or(Error::ProtocolViolation)?;
        moqt.take_request_id(request.request_id())?;
        let why = match &request {
            Request::Subscribe(_) | Request::TrackStatus(_) => {
                let planned = match &request {
                    Request::TrackStatus(status) => super::serve::plan(status, cx),
                    Request::Subscribe(subscribe) => super::serve::plan(subscribe, cx),
                    _ => Err(super::requests::Refuse::Internal),
                };
                match planned {
                    Ok(subscription) => {
                        let serve = MoqtSubscribeServe::on_stream(subscription, writer, reader);
                        return Poll::Ready(Ok(Step::Become(Box::new(Task::MoqtSubscribe(serve)))));
                    }
                    Err(why) => why,
                }
            }
            Request::SubscribeNamespace(subscribe) => {
                match super::Announcements::solicited(&subscribe.prefix, cx) {
                    Ok(announcements) => {
                        let ok = crate::moqt::RequestOk {
                            request_id: draft
                                .has_reply_request_ids()
                                .then_some(subscribe.request_id),
                            ..crate::moqt::RequestOk::default()
                        }
                        .to_vec(draft)
                        .map_err(|_| Error::Encode)?;
                        let announcer =
                            Announcer::on_stream(announcements, writer, reader, ok.into());
                        return Poll::Ready(Ok(Step::Become(Box::new(Task::MoqtAnnouncer(
                            announcer,
                        )))));
                    }
                    Err(why) => why,
                }
            }
            Request::PublishNamespace(publish) => match super::namespaces::accept(publish, cx) {
                Ok((accepted, ok)) => {
                    let stream = NamespaceStream::new(accepted, writer, reader, ok);
                    return Poll::Ready(Ok(Step::Become(Box::new(Task::MoqtNamespace(stream)))));
                }
                Err(why) => why,
            },
            _ => Refuse::NotSupported,
        };
        tracing::debug!(?request, ?why, "refusing the peer's request");
        let Some(refusal) = request.refusal(draft, why)? else {
            return Poll::Ready(Ok(Step::Done));
        };
        Poll::Ready(Ok(Step::Become(Box::new(Task::MoqtRequestRefuse(
            RequestRefuse::new(writer, reader, refusal),
        )))))
    }
}
