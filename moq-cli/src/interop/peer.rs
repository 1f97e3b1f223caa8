//! A moq-transport peer driven message by message, as an interop test needs: it opens the
//! draft's control stream, exchanges SETUP, sends requests where the draft puts them (the
//! control stream on 14 and 16, a stream of their own on 18) and reads the replies.
//!
//! It speaks the protocol itself on a bare connection ([`moqx_tokio::connect_transport`])
//! with the codec ([`moqx_net::moqt`]), not through a session: a test must see each reply
//! as it comes, and send what a session would not (a SUBSCRIBE for a track nobody
//! announced).

mod unasked;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use moqx_net::coding::Version;
use moqx_net::moqt::{ClientSetup, Control, Draft, Frame, ServerSetup, SetupOptions};
use moqx_net::transport::{RecvStream, SendStream, Session as _};
use moqx_runtime::binding::{BindingRecvStream, BindingSendStream, BindingSession};
use moqx_tokio::ClientConfig;

/// The request ids this client grants the relay (14, 16): enough for the relay's
/// SUBSCRIBEs to a publisher in every test.
const GRANTED_REQUEST_IDS: u64 = 64;

/// One connection to the relay, its SETUP exchanged.
pub(crate) struct Peer {
    transport: BindingSession,
    pub(crate) draft: Draft,
    control: BindingSendStream,
    control_in: Incoming,
    next_request_id: u64,
    /// The relay's own requests answered on streams of their own (18), kept open: a
    /// request stream's end withdraws it.
    answered_requests: Vec<RequestStream>,
}

/// A stream's incoming half, read message by message.
pub(crate) struct Incoming {
    stream: BindingRecvStream,
    buffer: BytesMut,
    ended: bool,
}

/// A request on a stream of its own (18): where its replies come.
pub(crate) struct RequestStream {
    pub(crate) send: BindingSendStream,
    pub(crate) replies: Incoming,
}

impl Peer {
    /// Connects to `url` speaking `version` and exchanges SETUP, within `patience`.
    pub(crate) async fn connect(
        url: &str,
        version: Version,
        config: ClientConfig,
        patience: Duration,
    ) -> Result<Self, String> {
        let draft = version
            .draft()
            .ok_or_else(|| format!("{version} is not a moq-transport draft"))?;
        let config = config.with_versions([version]);
        let connected = moqx_tokio::connect_transport(url, config);
        let (mut transport, session_config) = tokio::time::timeout(patience, connected)
            .await
            .map_err(|_| "no connection in time".to_owned())?
            .map_err(|error| format!("connecting: {error}"))?;
        let (control, control_in) = if draft.has_request_streams() {
            let send = moqx_kio::wait(|waiter| transport.poll_open_uni(waiter))
                .await
                .map_err(|error| format!("opening the control stream: {error}"))?;
            (send, None)
        } else {
            let (send, recv) = moqx_kio::wait(|waiter| transport.poll_open_bidi(waiter))
                .await
                .map_err(|error| format!("opening the control stream: {error}"))?;
            (send, Some(Incoming::new(recv)))
        };
        let mut control = control;
        let setup = ClientSetup {
            versions: match draft.has_setup_versions() {
                true => vec![draft.version_number()],
                false => Vec::new(),
            },
            options: SetupOptions {
                path: session_config.path.clone(),
                max_request_id: draft
                    .has_request_id_flow_control()
                    .then_some(GRANTED_REQUEST_IDS),
                implementation: draft
                    .implementation_parameter()
                    .map(|_| concat!("moqx-interop/", env!("CARGO_PKG_VERSION")).to_owned()),
                ..SetupOptions::default()
            },
        };
        write(&mut control, encode(&setup, draft)?).await?;
        let mut control_in = match control_in {
            Some(incoming) => incoming,
            // 18: the relay's own control stream.
            None => {
                let accepted = moqx_kio::wait(|waiter| transport.poll_accept_uni(waiter));
                let recv = tokio::time::timeout(patience, accepted)
                    .await
                    .map_err(|_| "no control stream from the relay in time".to_owned())?
                    .map_err(|error| format!("accepting the relay's control stream: {error}"))?;
                Incoming::new(recv)
            }
        };
        let frame = control_in.next(draft, patience).await?;
        ServerSetup::from_frame(&frame, draft)
            .map_err(|error| format!("the relay's first message is no SETUP: {error}"))?;
        Ok(Self {
            transport,
            draft,
            control,
            control_in,
            next_request_id: 0,
            answered_requests: Vec::new(),
        })
    }

    /// The request id of this client's next request.
    pub(crate) fn take_request_id(&mut self) -> u64 {
        let id = self.next_request_id;
        self.next_request_id += 2;
        id
    }

    /// Sends `message` on the control stream.
    pub(crate) async fn send<C: Control>(&mut self, message: &C) -> Result<(), String> {
        write(&mut self.control, encode(message, self.draft)?).await
    }

    /// The next control message from the relay, within `patience`; MAX_REQUEST_ID and
    /// REQUESTS_BLOCKED are read past, and the relay's unasked messages answered
    /// (`peer/unasked.rs`).
    pub(crate) async fn next_control(&mut self, patience: Duration) -> Result<Frame, String> {
        loop {
            let frame = self.control_in.next(self.draft, patience).await?;
            if matches!(frame.kind, 0x15 | 0x1a) && !self.draft.has_request_streams() {
                continue; // request-id flow control
            }
            if unasked::answer(self, &frame, None).await? {
                continue;
            }
            return Ok(frame);
        }
    }

    /// Sends a request where the draft puts it: on its own stream (18, returned, its
    /// replies come there) or on the control stream.
    pub(crate) async fn request<C: Control>(
        &mut self,
        message: &C,
    ) -> Result<Option<RequestStream>, String> {
        if !self.draft.has_request_streams() {
            self.send(message).await?;
            return Ok(None);
        }
        let (mut send, recv) = moqx_kio::wait(|waiter| self.transport.poll_open_bidi(waiter))
            .await
            .map_err(|error| format!("opening a request stream: {error}"))?;
        write(&mut send, encode(message, self.draft)?).await?;
        Ok(Some(RequestStream {
            send,
            replies: Incoming::new(recv),
        }))
    }

    /// The next reply to a request: on its stream (18) or the control stream.
    pub(crate) async fn reply(
        &mut self,
        stream: Option<&mut RequestStream>,
        patience: Duration,
    ) -> Result<Frame, String> {
        match stream {
            Some(stream) => stream.replies.next(self.draft, patience).await,
            None => self.next_control(patience).await,
        }
    }

    /// A request the relay sent this client (a SUBSCRIBE to a publisher): on 18 the first
    /// message of a stream the relay opened (returned, to answer on), else the next
    /// control message.
    pub(crate) async fn next_request(
        &mut self,
        patience: Duration,
    ) -> Result<(Frame, Option<RequestStream>), String> {
        if !self.draft.has_request_streams() {
            return Ok((self.next_control(patience).await?, None));
        }
        loop {
            let accepted = moqx_kio::wait(|waiter| self.transport.poll_accept_bidi(waiter));
            let (send, recv) = tokio::time::timeout(patience, accepted)
                .await
                .map_err(|_| "no request from the relay in time".to_owned())?
                .map_err(|error| format!("accepting a request stream: {error}"))?;
            let mut stream = RequestStream {
                send,
                replies: Incoming::new(recv),
            };
            let frame = stream.replies.next(self.draft, patience).await?;
            if unasked::answer(self, &frame, Some(&mut stream)).await? {
                self.answered_requests.push(stream);
                continue;
            }
            return Ok((frame, Some(stream)));
        }
    }

    /// Answers a request: on its stream (18) or the control stream.
    pub(crate) async fn answer<C: Control>(
        &mut self,
        stream: Option<&mut RequestStream>,
        message: &C,
    ) -> Result<(), String> {
        match stream {
            Some(stream) => write(&mut stream.send, encode(message, self.draft)?).await,
            None => self.send(message).await,
        }
    }

    /// Whether the relay closed the connection (and with which code) within `patience`.
    pub(crate) async fn closed_within(&mut self, patience: Duration) -> Option<String> {
        let closed = moqx_kio::wait(|waiter| self.transport.poll_closed(waiter));
        tokio::time::timeout(patience, closed)
            .await
            .ok()
            .map(|error| error.to_string())
    }

    /// Closes the connection without error.
    pub(crate) fn close(mut self) {
        self.transport.close(0x0, "");
    }
}

impl Incoming {
    /// Stops the stream: this side reads no more of it.
    pub(crate) fn stop(&mut self, code: u64) {
        self.stream.stop(code);
    }

    fn new(stream: BindingRecvStream) -> Self {
        Self {
            stream,
            buffer: BytesMut::new(),
            ended: false,
        }
    }

    /// The next message on the stream, within `patience`.
    pub(crate) async fn next(&mut self, draft: Draft, patience: Duration) -> Result<Frame, String> {
        let next = async {
            loop {
                let mut cursor = &self.buffer[..];
                match Frame::decode(&mut cursor, draft) {
                    Ok(frame) => {
                        let used = self.buffer.len() - cursor.len();
                        let _ = self.buffer.split_to(used);
                        return Ok(frame);
                    }
                    Err(moqx_net::coding::DecodeError::Short) if !self.ended => {}
                    Err(error) => return Err(format!("a malformed message: {error}")),
                }
                let chunk = moqx_kio::wait(|waiter| self.stream.poll_read(waiter)).await;
                match chunk {
                    Ok(Some(chunk)) => self.buffer.extend_from_slice(&chunk),
                    Ok(None) => {
                        if self.buffer.is_empty() {
                            return Err("the stream ended".to_owned());
                        }
                        self.ended = true;
                    }
                    Err(error) => return Err(format!("the stream failed: {error}")),
                }
            }
        };
        tokio::time::timeout(patience, next)
            .await
            .map_err(|_| "no message in time".to_owned())?
    }
}

/// `message`, encoded for `draft`.
fn encode<C: Control>(message: &C, draft: Draft) -> Result<Bytes, String> {
    message
        .to_vec(draft)
        .map(Bytes::from)
        .map_err(|error| format!("encoding {}: {error}", C::NAME))
}

/// Writes all of `bytes` on `stream`.
async fn write(stream: &mut BindingSendStream, mut bytes: Bytes) -> Result<(), String> {
    while !bytes.is_empty() {
        moqx_kio::wait(|waiter| stream.poll_write(waiter, &mut bytes))
            .await
            .map_err(|error| format!("writing: {error}"))?;
    }
    Ok(())
}
