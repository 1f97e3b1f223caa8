//! The streams a peer opens on an HTTP/3 connection, sorted by what they are: its control
//! stream (whose SETTINGS we read), QPACK streams (drained), WebTransport streams (handed to
//! the session with their first payload), and requests (the extended CONNECT, server side).

use std::collections::VecDeque;
use std::task::Poll;

use bytes::{Buf, BytesMut};
use moqx_kio::Waiter;
use moqx_net::transport::{RecvStream, SendStream, Session, StreamError, TransportError};
use web_transport_proto::{Settings, SettingsError};

use super::header::{BidiKind, HeaderRead, Incoming, UniKind, parse_bidi, parse_uni};
use super::stream::{WebTransportRecvStream, WebTransportSendStream};
use super::{H3_CLOSED_CRITICAL_STREAM, H3_REQUEST_REJECTED, H3_SETTINGS_ERROR};
use super::{H3_STREAM_CREATION_ERROR, MAX_HEADER_BYTES};
use crate::quic::{QuicRecvStream, QuicSendStream, QuicSession};

/// Peer-opened streams, sorted.
#[derive(Debug, Default)]
pub(crate) struct Demux {
    uni_headers: Vec<Incoming>,
    bidi_headers: Vec<(QuicSendStream, Incoming)>,
    control: Option<ControlStream>,
    qpack: Vec<QuicRecvStream>,
    /// The peer's SETTINGS, once its control stream delivered them.
    pub(crate) settings: Option<Settings>,
    /// WebTransport uni streams, with the session id each names.
    pub(crate) uni: VecDeque<(u64, WebTransportRecvStream)>,
    /// WebTransport bidi streams, with the session id each names.
    pub(crate) bidi: VecDeque<(u64, WebTransportSendStream, WebTransportRecvStream)>,
    /// Request streams and the bytes read from them so far (servers only).
    pub(crate) requests: VecDeque<(QuicSendStream, QuicRecvStream, BytesMut)>,
    /// Whether requests are expected (a server); a client refuses them.
    serves_requests: bool,
}

#[derive(Debug)]
struct ControlStream {
    stream: QuicRecvStream,
    /// The stream from its start (type byte included) until SETTINGS decode.
    buffered: BytesMut,
}

impl Drop for Demux {
    /// The peer's control and QPACK streams live as long as the connection (RFC 9114
    /// §6.2.1, RFC 9204 §4.2): stopping them would be a connection error on the peer's
    /// side, so they are left open.
    fn drop(&mut self) {
        if let Some(control) = self.control.take() {
            control.stream.leave_open();
        }
        for stream in self.qpack.drain(..) {
            stream.leave_open();
        }
    }
}

/// Why sorting streams stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DemuxError {
    /// The connection is gone.
    Transport(TransportError),
    /// The peer broke HTTP/3: the connection must close with this code.
    Protocol { code: u64, reason: String },
}

impl Demux {
    /// A server's: the client's extended CONNECT arrives as a request stream.
    pub(crate) fn serving_requests() -> Self {
        let mut demux = Self::default();
        demux.serves_requests = true;
        demux
    }

    /// Accepts every stream the peer opened and reads what it can of each header, the
    /// control stream and the QPACK streams. Registers `waiter` for more.
    pub(crate) fn poll(
        &mut self,
        session: &mut QuicSession,
        waiter: &Waiter,
    ) -> Result<(), DemuxError> {
        loop {
            match session.poll_accept_uni(waiter) {
                Poll::Ready(Ok(stream)) => self.uni_headers.push(Incoming::new(stream)),
                Poll::Ready(Err(error)) => return Err(DemuxError::Transport(error)),
                Poll::Pending => break,
            }
        }
        loop {
            match session.poll_accept_bidi(waiter) {
                Poll::Ready(Ok((send, recv))) => {
                    self.bidi_headers.push((send, Incoming::new(recv)));
                }
                Poll::Ready(Err(error)) => return Err(DemuxError::Transport(error)),
                Poll::Pending => break,
            }
        }
        self.sort_uni(waiter)?;
        self.sort_bidi(waiter);
        self.read_control(waiter)?;
        self.drain_qpack(waiter);
        Ok(())
    }

    fn sort_uni(&mut self, waiter: &Waiter) -> Result<(), DemuxError> {
        let mut index = 0;
        while index < self.uni_headers.len() {
            let read = self.uni_headers[index].poll_header(waiter, parse_uni);
            let Poll::Ready(read) = read else {
                index += 1;
                continue;
            };
            let mut incoming = self.uni_headers.swap_remove(index);
            let HeaderRead::Parsed(kind, rest) = read else {
                continue;
            };
            match kind {
                UniKind::Control => {
                    if self.control.is_some() {
                        return Err(DemuxError::Protocol {
                            code: H3_STREAM_CREATION_ERROR,
                            reason: "a second HTTP/3 control stream".into(),
                        });
                    }
                    let mut buffered = BytesMut::from(&[0u8][..]);
                    buffered.extend_from_slice(&rest);
                    self.control = Some(ControlStream {
                        stream: incoming.stream,
                        buffered,
                    });
                }
                UniKind::Qpack => self.qpack.push(incoming.stream),
                UniKind::WebTransport { session } => self
                    .uni
                    .push_back((session, WebTransportRecvStream::new(incoming.stream, rest))),
                UniKind::Other(_) => incoming.stream.stop(H3_STREAM_CREATION_ERROR),
            }
        }
        Ok(())
    }

    fn sort_bidi(&mut self, waiter: &Waiter) {
        let mut index = 0;
        while index < self.bidi_headers.len() {
            let read = self.bidi_headers[index].1.poll_header(waiter, parse_bidi);
            let Poll::Ready(read) = read else {
                index += 1;
                continue;
            };
            let (mut send, mut incoming) = self.bidi_headers.swap_remove(index);
            let HeaderRead::Parsed(kind, rest) = read else {
                continue;
            };
            match kind {
                BidiKind::Request if self.serves_requests => {
                    self.requests
                        .push_back((send, incoming.stream, BytesMut::from(&rest[..])));
                }
                BidiKind::Request => {
                    send.reset(H3_REQUEST_REJECTED);
                    incoming.stream.stop(H3_REQUEST_REJECTED);
                }
                BidiKind::WebTransport { session } => self.bidi.push_back((
                    session,
                    WebTransportSendStream::new(send),
                    WebTransportRecvStream::new(incoming.stream, rest),
                )),
                BidiKind::Other(_) => {
                    send.reset(H3_STREAM_CREATION_ERROR);
                    incoming.stream.stop(H3_STREAM_CREATION_ERROR);
                }
            }
        }
    }

    /// Reads the peer's SETTINGS, then discards the rest of its control stream (we act on
    /// no later control frame; the connection's own close ends the session).
    fn read_control(&mut self, waiter: &Waiter) -> Result<(), DemuxError> {
        let Some(control) = &mut self.control else {
            return Ok(());
        };
        loop {
            if self.settings.is_none() {
                let mut cursor = &control.buffered[..];
                match Settings::decode(&mut cursor) {
                    Ok(settings) => {
                        self.settings = Some(settings);
                        control.buffered = BytesMut::new();
                    }
                    Err(SettingsError::UnexpectedEnd)
                        if control.buffered.len() <= MAX_HEADER_BYTES => {}
                    Err(error) => {
                        return Err(DemuxError::Protocol {
                            code: H3_SETTINGS_ERROR,
                            reason: format!("bad HTTP/3 SETTINGS: {error}"),
                        });
                    }
                }
            }
            let chunk = match control.stream.poll_read(waiter) {
                Poll::Pending => return Ok(()),
                Poll::Ready(Ok(Some(chunk))) => chunk,
                Poll::Ready(Err(StreamError::Connection(error))) => {
                    return Err(DemuxError::Transport(error));
                }
                Poll::Ready(Ok(None) | Err(_)) => {
                    return Err(DemuxError::Protocol {
                        code: H3_CLOSED_CRITICAL_STREAM,
                        reason: "the peer closed its HTTP/3 control stream".into(),
                    });
                }
            };
            // After SETTINGS, later control frames are read and dropped.
            if self.settings.is_none() {
                control.buffered.extend_from_slice(&chunk);
            }
        }
    }

    fn drain_qpack(&mut self, waiter: &Waiter) {
        self.qpack.retain_mut(|stream| {
            loop {
                match stream.poll_read(waiter) {
                    Poll::Pending => return true,
                    Poll::Ready(Ok(Some(mut chunk))) => chunk.advance(chunk.len()),
                    Poll::Ready(Ok(None) | Err(_)) => return false,
                }
            }
        });
    }
}
