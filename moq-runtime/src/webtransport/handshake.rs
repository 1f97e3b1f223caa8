//! The HTTP/3 handshake that starts a WebTransport session: SETTINGS both ways (RFC 9114
//! §7.2.4 with RFC 9220's extended CONNECT, RFC 9297's datagrams and WebTransport's session
//! limit), then the client's extended CONNECT and the server's response.
//!
//! Both sides are poll state machines over a [`QuicSession`], so any driver runs them:
//! call `poll` with the waiter of the task that drives it until it is ready.

use std::task::Poll;

use bytes::{Bytes, BytesMut};
use moqx_kio::Waiter;
use moqx_net::transport::{RecvStream, SendStream, Session, StreamError, TransportError};
use web_transport_proto::{ConnectError, ConnectRequest, ConnectResponse, Settings, http};

use super::control::{ConnectStream, OwnControlStream};
use super::demux::{Demux, DemuxError};
use super::session::WebTransportSession;
use super::{H3_MESSAGE_ERROR, MAX_HEADER_BYTES, WebTransportError};
use crate::quic::{QuicRecvStream, QuicSendStream, QuicSession};

/// A client's side of the handshake: sends SETTINGS, waits for the server's, sends the
/// extended CONNECT for a URL offering subprotocols, and checks the response.
#[derive(Debug)]
pub struct ClientHandshake {
    inner: QuicSession,
    demux: Demux,
    control: ControlSender,
    request: Bytes,
    protocols: Vec<String>,
    state: ClientState,
}

#[derive(Debug)]
enum ClientState {
    /// Waiting for the server's SETTINGS before sending the CONNECT (RFC 9220 §3).
    AwaitSettings,
    /// Opening the CONNECT stream and writing the request.
    Request(Option<(QuicSendStream, QuicRecvStream)>, Bytes),
    /// Reading the response.
    Response(QuicSendStream, QuicRecvStream, BytesMut),
    /// Handed out.
    Done,
}

/// A server's side of the handshake: sends SETTINGS and waits for the client's extended
/// CONNECT, which it hands out as a [`WebTransportRequest`] to accept or reject.
#[derive(Debug)]
pub struct ServerHandshake {
    inner: Option<QuicSession>,
    demux: Demux,
    control: ControlSender,
}

/// A client's extended CONNECT, to [`accept`](Self::accept) or [`reject`](Self::reject).
#[derive(Debug)]
pub struct WebTransportRequest {
    inner: QuicSession,
    demux: Demux,
    control: OwnControlStream,
    send: QuicSendStream,
    recv: QuicRecvStream,
    /// Bytes read after the request's HEADERS frame.
    leftover: BytesMut,
    request: ConnectRequest,
}

/// Our control stream: opened, then SETTINGS written in full.
#[derive(Debug, Default)]
struct ControlSender {
    stream: Option<QuicSendStream>,
    pending: Bytes,
    written: bool,
}

impl Drop for ControlSender {
    /// An HTTP/3 control stream lives as long as its connection (RFC 9114 §6.2.1: closing
    /// it is a connection error), so a handshake that ends without a session (a rejected
    /// request) leaves it open for the connection's last moments.
    fn drop(&mut self) {
        if let Some(stream) = self.stream.take() {
            stream.leave_open();
        }
    }
}

impl ClientHandshake {
    /// Starts the handshake for `url` (an `https://` URL), offering `protocols` in
    /// `wt-available-protocols` in order of preference.
    pub fn new(inner: QuicSession, url: url::Url, protocols: Vec<String>) -> Self {
        let mut request = BytesMut::new();
        // Encoding fails only for a protocol name that is not an RFC 8941 string; then
        // the request goes without it and the response check reports the mismatch.
        let encoded = ConnectRequest::new(url.clone())
            .with_protocols(protocols.iter().cloned())
            .encode(&mut request);
        if encoded.is_err() {
            request.clear();
            let _ = ConnectRequest::new(url).encode(&mut request);
        }
        Self {
            inner,
            demux: Demux::default(),
            control: ControlSender::default(),
            request: request.freeze(),
            protocols,
            state: ClientState::AwaitSettings,
        }
    }

    /// Ready with the session once the server accepted, or with why not.
    pub fn poll(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<WebTransportSession, WebTransportError>> {
        match self.poll_steps(waiter) {
            Poll::Ready(Err(error)) => {
                self.state = ClientState::Done;
                if let Some((code, reason)) = error.close_code() {
                    self.inner.close(code, &reason);
                }
                Poll::Ready(Err(error))
            }
            other => other,
        }
    }

    fn poll_steps(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<WebTransportSession, WebTransportError>> {
        if let Poll::Ready(Err(error)) = self.control.poll(&mut self.inner, waiter) {
            return Poll::Ready(Err(WebTransportError::Transport(error)));
        }
        if let Err(error) = self.demux.poll(&mut self.inner, waiter) {
            return Poll::Ready(Err(error.into()));
        }
        loop {
            match &mut self.state {
                ClientState::AwaitSettings => {
                    let Some(settings) = &self.demux.settings else {
                        return Poll::Pending;
                    };
                    if settings.supports_webtransport() == 0 {
                        return Poll::Ready(Err(WebTransportError::NotSupported));
                    }
                    self.state = ClientState::Request(None, self.request.clone());
                }
                ClientState::Request(stream, bytes) => {
                    if stream.is_none() {
                        match self.inner.poll_open_bidi(waiter) {
                            Poll::Ready(Ok(pair)) => *stream = Some(pair),
                            Poll::Ready(Err(error)) => {
                                return Poll::Ready(Err(WebTransportError::Transport(error)));
                            }
                            Poll::Pending => return Poll::Pending,
                        }
                    }
                    let Some((send, _)) = stream else {
                        return Poll::Pending;
                    };
                    match send.poll_write(waiter, bytes) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Err(error)) => return Poll::Ready(Err(error.into())),
                        Poll::Ready(Ok(())) => {}
                    }
                    let Some((send, recv)) = stream.take() else {
                        return Poll::Pending;
                    };
                    self.state = ClientState::Response(send, recv, BytesMut::new());
                }
                ClientState::Response(_, recv, buffered) => {
                    let response = match poll_headers(recv, buffered, waiter, |bytes| {
                        ConnectResponse::decode(bytes)
                    }) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(result) => result,
                    };
                    let response = match response {
                        Ok(response) => response,
                        Err(HeadersError::Stream(error)) => {
                            return Poll::Ready(Err(error.into()));
                        }
                        Err(HeadersError::Decode(ConnectError::WrongStatus(Some(status)))) => {
                            return Poll::Ready(Err(WebTransportError::Rejected {
                                status: status.as_u16(),
                            }));
                        }
                        Err(HeadersError::Decode(error)) => {
                            return Poll::Ready(Err(WebTransportError::Protocol {
                                code: H3_MESSAGE_ERROR,
                                reason: format!("a malformed CONNECT response: {error}"),
                            }));
                        }
                    };
                    if !self.protocols.is_empty()
                        && !response
                            .protocol
                            .as_ref()
                            .is_some_and(|selected| self.protocols.contains(selected))
                    {
                        return Poll::Ready(Err(WebTransportError::ProtocolMismatch {
                            offered: self.protocols.clone(),
                            selected: response.protocol,
                        }));
                    }
                    let ClientState::Response(send, recv, leftover) =
                        std::mem::replace(&mut self.state, ClientState::Done)
                    else {
                        return Poll::Pending;
                    };
                    let Some(control) = self.control.stream.take() else {
                        return Poll::Pending;
                    };
                    let connect = ConnectStream::new(send, recv, Bytes::new(), leftover);
                    return Poll::Ready(Ok(WebTransportSession::new(
                        self.inner.clone(),
                        std::mem::take(&mut self.demux),
                        OwnControlStream::new(control),
                        connect,
                        response.protocol,
                    )));
                }
                ClientState::Done => return Poll::Pending,
            }
        }
    }
}

impl ServerHandshake {
    /// Starts the server's side on an accepted `h3` connection.
    pub fn new(inner: QuicSession) -> Self {
        Self {
            inner: Some(inner),
            demux: Demux::serving_requests(),
            control: ControlSender::default(),
        }
    }

    /// Ready with the client's request, or with why there is none. A malformed request is
    /// answered with 400 and the connection closed.
    pub fn poll(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<WebTransportRequest, WebTransportError>> {
        let Some(inner) = &mut self.inner else {
            return Poll::Pending;
        };
        if let Poll::Ready(Err(error)) = self.control.poll(inner, waiter) {
            return Poll::Ready(Err(WebTransportError::Transport(error)));
        }
        if let Err(error) = self.demux.poll(inner, waiter) {
            let error = WebTransportError::from(error);
            if let Some((code, reason)) = error.close_code() {
                inner.close(code, &reason);
            }
            return Poll::Ready(Err(error));
        }
        let Some((_, recv, buffered)) = self.demux.requests.front_mut() else {
            return Poll::Pending;
        };
        let decoded = match poll_headers(recv, buffered, waiter, |bytes| {
            ConnectRequest::decode(bytes)
        }) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(decoded) => decoded,
        };
        let Some((mut send, recv, leftover)) = self.demux.requests.pop_front() else {
            return Poll::Pending;
        };
        let Some(inner) = self.inner.take() else {
            return Poll::Pending;
        };
        let request = match decoded {
            Ok(request) => request,
            Err(error) => {
                let reason = match error {
                    HeadersError::Decode(error) => format!("a malformed CONNECT request: {error}"),
                    HeadersError::Stream(error) => format!("the CONNECT stream failed: {error}"),
                };
                let mut response = BytesMut::new();
                let _ = ConnectResponse::new(http::StatusCode::BAD_REQUEST).encode(&mut response);
                send.try_write(&mut response.freeze(), true);
                let mut inner = inner;
                inner.close(H3_MESSAGE_ERROR, &reason);
                return Poll::Ready(Err(WebTransportError::BadRequest(reason)));
            }
        };
        let Some(control) = self.control.stream.take() else {
            return Poll::Pending;
        };
        Poll::Ready(Ok(WebTransportRequest {
            inner,
            demux: std::mem::take(&mut self.demux),
            control: OwnControlStream::new(control),
            send,
            recv,
            leftover,
            request,
        }))
    }
}

impl WebTransportRequest {
    /// The requested URL (`https://authority/path?query`).
    pub fn url(&self) -> &url::Url {
        &self.request.url
    }

    /// The path and query, as a raw-QUIC client would put them in SETUP.
    pub fn path(&self) -> String {
        let url = &self.request.url;
        match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        }
    }

    /// The subprotocols the client offered (`wt-available-protocols`), in its order.
    pub fn protocols(&self) -> &[String] {
        &self.request.protocols
    }

    /// Accepts with a 200 naming `protocol` in `wt-protocol` (`None` names none).
    pub fn accept(self, protocol: Option<&str>) -> WebTransportSession {
        let mut response = ConnectResponse::OK;
        if let Some(protocol) = protocol {
            response = response.with_protocol(protocol);
        }
        let mut bytes = BytesMut::new();
        // A protocol that is not an RFC 8941 string is left out; the client then reports
        // the mismatch.
        if response.encode(&mut bytes).is_err() {
            bytes.clear();
            let _ = ConnectResponse::OK.encode(&mut bytes);
        }
        let connect = ConnectStream::new(self.send, self.recv, bytes.freeze(), self.leftover);
        WebTransportSession::new(
            self.inner,
            self.demux,
            self.control,
            connect,
            protocol.map(str::to_owned),
        )
    }

    /// Refuses with `status` (e.g. 403, 404). The response ends the request stream; the
    /// connection stays open so that the response is delivered (closing at once would
    /// discard it), and the client closes it on reading the status. A driver closes it
    /// after a short linger in case the client does not.
    pub fn reject(mut self, status: http::StatusCode) {
        let mut response = BytesMut::new();
        let _ = ConnectResponse::new(status).encode(&mut response);
        self.send.try_write(&mut response.freeze(), true);
    }
}

impl ControlSender {
    /// Opens the control stream and writes SETTINGS; ready once all of it is written.
    fn poll(
        &mut self,
        session: &mut QuicSession,
        waiter: &Waiter,
    ) -> Poll<Result<(), TransportError>> {
        if self.written {
            return Poll::Ready(Ok(()));
        }
        if self.stream.is_none() {
            match session.poll_open_uni(waiter) {
                Poll::Ready(Ok(stream)) => self.stream = Some(stream),
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Pending => return Poll::Pending,
            }
            let mut settings = Settings::default();
            settings.enable_webtransport(1);
            let mut bytes = BytesMut::new();
            settings.encode(&mut bytes);
            self.pending = bytes.freeze();
        }
        let Some(stream) = &mut self.stream else {
            return Poll::Pending;
        };
        match stream.poll_write(waiter, &mut self.pending) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(())) => {
                self.written = true;
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(StreamError::Connection(error))) => Poll::Ready(Err(error)),
            Poll::Ready(Err(error)) => Poll::Ready(Err(TransportError::Lost(format!(
                "the HTTP/3 control stream: {error}"
            )))),
        }
    }
}

/// Why a HEADERS frame could not be read.
enum HeadersError {
    Stream(StreamError),
    Decode(ConnectError),
}

/// Reads `recv` into `buffered` until `decode` no longer asks for more bytes; what follows
/// the frame stays in `buffered`.
fn poll_headers<T>(
    recv: &mut QuicRecvStream,
    buffered: &mut BytesMut,
    waiter: &Waiter,
    decode: impl Fn(&mut &[u8]) -> Result<T, ConnectError>,
) -> Poll<Result<T, HeadersError>> {
    loop {
        if !buffered.is_empty() {
            let mut cursor = &buffered[..];
            match decode(&mut cursor) {
                Ok(value) => {
                    let consumed = buffered.len() - cursor.len();
                    let _ = buffered.split_to(consumed);
                    return Poll::Ready(Ok(value));
                }
                Err(ConnectError::UnexpectedEnd) if buffered.len() <= MAX_HEADER_BYTES => {}
                Err(error) => return Poll::Ready(Err(HeadersError::Decode(error))),
            }
        }
        match recv.poll_read(waiter) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Ok(Some(chunk))) => buffered.extend_from_slice(&chunk),
            Poll::Ready(Ok(None)) => {
                return Poll::Ready(Err(HeadersError::Decode(ConnectError::UnexpectedEnd)));
            }
            Poll::Ready(Err(error)) => return Poll::Ready(Err(HeadersError::Stream(error))),
        }
    }
}

impl From<DemuxError> for WebTransportError {
    fn from(error: DemuxError) -> Self {
        match error {
            DemuxError::Transport(error) => Self::Transport(error),
            DemuxError::Protocol { code, reason } => Self::Protocol { code, reason },
        }
    }
}

impl From<StreamError> for WebTransportError {
    fn from(error: StreamError) -> Self {
        match error {
            StreamError::Connection(error) => Self::Transport(error),
            other => Self::Protocol {
                code: H3_MESSAGE_ERROR,
                reason: format!("the CONNECT stream: {other}"),
            },
        }
    }
}
