//! The control stream's sub-machine: writes this side's SETUP and queued control messages,
//! reads the peer's SETUP and then its control messages.
//!
//! One type serves every draft's layout: 14's and 16's one bidirectional stream (the
//! client's opens it with CLIENT_SETUP, the server's answers on it), and 18's two
//! unidirectional ones (this side's writes, the peer's reads). Its end, reset or FIN, is a
//! protocol violation on every draft: the control stream lives as long as the session.

use std::task::Poll;

use moqx_kio::Waiter;

use super::{requests, setup};
use crate::Error;
use crate::moqt::{
    ClientSetup, Control, Frame, GoAway, MAX_PAYLOAD_BYTES, MaxRequestId, RequestsBlocked,
    ServerSetup,
};
use crate::session::Side;
use crate::session::context::Context;
use crate::session::stream::{ReadError, Reader, Writer};
use crate::transport::{RecvStream, SendStream};

/// The largest control message (type, length and payload) a draft can frame.
const MAX_CONTROL_MESSAGE_BYTES: usize = MAX_PAYLOAD_BYTES + 16;

/// A control stream: this side's half (`writer`), the peer's (`reader`), or both.
pub(crate) struct ControlStream<S, R> {
    writer: Option<Writer<S>>,
    reader: Option<Reader<R>>,
    /// The peer's SETUP was read (or this stream carries none of the peer's messages).
    peer_setup_read: bool,
}

impl<S: SendStream, R: RecvStream> ControlStream<S, R> {
    /// 18: this side's unidirectional control stream, opened with its SETUP.
    pub(crate) fn sender(stream: S, cx: &Context) -> Result<Self, Error> {
        let mut writer = Writer::new(stream);
        writer.queue(setup::encoded_setup(cx)?);
        Ok(Self {
            writer: Some(writer),
            reader: None,
            peer_setup_read: true,
        })
    }

    /// 18: the peer's unidirectional control stream, its SETUP not read yet.
    pub(crate) fn receiver(reader: Reader<R>) -> Self {
        Self {
            writer: None,
            reader: Some(reader),
            peer_setup_read: false,
        }
    }

    /// 14, 16: the client's control stream, opened with CLIENT_SETUP.
    pub(crate) fn client(send: S, recv: R, cx: &Context) -> Result<Self, Error> {
        let mut writer = Writer::new(send);
        writer.queue(setup::encoded_setup(cx)?);
        Ok(Self {
            writer: Some(writer),
            reader: Some(Reader::new(recv, cx.config.limits.max_setup_bytes)),
            peer_setup_read: false,
        })
    }

    /// 14, 16: the server's side of the client's control stream, whose CLIENT_SETUP was
    /// read: the hook decides on it, and SERVER_SETUP answers.
    pub(crate) fn server(
        writer: Writer<S>,
        mut reader: Reader<R>,
        client_setup: ClientSetup,
        cx: &mut Context,
    ) -> Result<Self, Error> {
        setup::receive_client_setup(cx, client_setup)?;
        let mut writer = writer;
        writer.queue(setup::encoded_setup(cx)?);
        reader.set_limit(control_limit(cx));
        Ok(Self {
            writer: Some(writer),
            reader: Some(reader),
            peer_setup_read: true,
        })
    }

    pub(crate) fn poll(&mut self, waiter: &Waiter, cx: &mut Context) -> Poll<Result<(), Error>> {
        loop {
            if let Some(writer) = self.writer.as_mut() {
                let moqt = cx.moqt.as_mut().ok_or(Error::ProtocolViolation)?;
                for message in moqt.take_outbox(waiter.waker()) {
                    writer.queue(message);
                }
                if let Poll::Ready(Err(error)) = writer.poll_flush(waiter) {
                    tracing::debug!(%error, "this side's control stream failed");
                    return Poll::Ready(Err(Error::ProtocolViolation));
                }
            }
            let Some(reader) = self.reader.as_mut() else {
                return Poll::Pending;
            };
            let draft = cx.moqt.as_ref().ok_or(Error::ProtocolViolation)?.draft;
            let frame = match reader.poll_message(waiter, |buf| Frame::decode(buf, draft)) {
                Poll::Ready(Ok(Some(frame))) => frame,
                Poll::Ready(Ok(None)) => {
                    tracing::debug!("the peer ended its control stream");
                    return Poll::Ready(Err(Error::ProtocolViolation));
                }
                Poll::Ready(Err(ReadError::Stream(error))) => {
                    tracing::debug!(%error, "the peer's control stream failed");
                    return Poll::Ready(Err(Error::ProtocolViolation));
                }
                Poll::Ready(Err(ReadError::Malformed(error))) => {
                    return Poll::Ready(Err(error));
                }
                Poll::Pending => return Poll::Pending,
            };
            if self.peer_setup_read {
                on_control_message(frame, cx)?;
            } else {
                self.peer_setup_read = true;
                reader.set_limit(control_limit(cx));
                on_setup(&frame, cx)?;
                // The server on 14 and 16 answered when it accepted the stream; a client's
                // SETUP went out first. Nothing to write here.
            }
        }
    }
}

/// The size limit of a control message after SETUP: the session's, up to what a draft can
/// frame.
fn control_limit(cx: &Context) -> usize {
    cx.config
        .limits
        .max_message_bytes
        .min(MAX_CONTROL_MESSAGE_BYTES)
}

/// The peer's SETUP: the first message of its control stream, and nothing else may be.
fn on_setup(frame: &Frame, cx: &mut Context) -> Result<(), Error> {
    let draft = cx.moqt.as_ref().ok_or(Error::ProtocolViolation)?.draft;
    let result = match cx.side {
        Side::Server => ClientSetup::from_frame(frame, draft)
            .map_err(Error::from)
            .and_then(|setup| setup::receive_client_setup(cx, setup)),
        Side::Client => ServerSetup::from_frame(frame, draft)
            .map_err(Error::from)
            .and_then(|setup| setup::receive_server_setup(cx, setup)),
    };
    if let Err(error) = &result {
        tracing::debug!(kind = frame.kind, %error, "the peer's control stream opened without a valid SETUP");
    }
    result
}

/// A control message after SETUP.
fn on_control_message(frame: Frame, cx: &mut Context) -> Result<(), Error> {
    let moqt = cx.moqt.as_mut().ok_or(Error::ProtocolViolation)?;
    let draft = moqt.draft;
    if Some(frame.kind) == GoAway::message_type(draft) {
        let goaway = GoAway::from_frame(&frame, draft)?;
        return on_goaway(goaway, cx);
    }
    if Some(frame.kind) == MaxRequestId::message_type(draft) {
        let grant = MaxRequestId::from_frame(&frame, draft)?;
        // spec: "If a MAX_REQUEST_ID message is received with a Request ID less than or
        // equal to the current maximum, the receiver MUST close the session with a
        // PROTOCOL_VIOLATION" (14, 16).
        if grant.request_id <= moqt.peer_max_request_id {
            tracing::debug!(
                granted = grant.request_id,
                current = moqt.peer_max_request_id,
                "MAX_REQUEST_ID does not grow"
            );
            return Err(Error::ProtocolViolation);
        }
        moqt.peer_max_request_id = grant.request_id;
        return Ok(());
    }
    if Some(frame.kind) == RequestsBlocked::message_type(draft) {
        let blocked = RequestsBlocked::from_frame(&frame, draft)?;
        tracing::debug!(
            maximum = blocked.maximum,
            "the peer is out of request ids (REQUESTS_BLOCKED)"
        );
        return Ok(());
    }
    if draft.has_request_streams() {
        // 18: only SETUP and GOAWAY travel on a control stream.
        tracing::debug!(
            kind = frame.kind,
            "a message that has no place on the control stream"
        );
        return Err(Error::ProtocolViolation);
    }
    requests::on_control_stream(frame, cx)
}

/// The peer's GOAWAY: no new requests go out, and the handle learns where to reconnect.
fn on_goaway(goaway: GoAway, cx: &mut Context) -> Result<(), Error> {
    let moqt = cx.moqt.as_mut().ok_or(Error::ProtocolViolation)?;
    if moqt.goaway_received {
        tracing::debug!("a second GOAWAY");
        return Err(Error::ProtocolViolation);
    }
    if cx.side == Side::Server && !goaway.uri.is_empty() {
        // spec: a client's GOAWAY names no new session URI.
        tracing::debug!("the client's GOAWAY names a URI");
        return Err(Error::ProtocolViolation);
    }
    if let Some(id) = goaway.request_id {
        // 18: the smallest of this side's request ids the peer did not process: this
        // side's parity.
        let ours = match cx.side {
            Side::Client => 0,
            Side::Server => 1,
        };
        if id % 2 != ours {
            tracing::debug!(id, "GOAWAY names a request id of the peer's own parity");
            return Err(Error::InvalidRequestId);
        }
    }
    moqt.goaway_received = true;
    tracing::info!(
        uri = %crate::redact::Redacted(&goaway.uri),
        timeout = ?goaway.timeout,
        "the peer is going away (GOAWAY)"
    );
    cx.goaway = true;
    cx.goaway_uri.get_or_insert(goaway.uri);
    Ok(())
}
