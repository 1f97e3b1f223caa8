//! The receive path: a record's frames, each checked against the peer's limits and the
//! stream's state (RFC 9000 §19 and §4, as QMux amends them).

use bytes::Bytes;
use moqx_net::runtime::Instant;
use moqx_net::transport::TransportError;

use super::stream::{RecvHalf, SendHalf, Stream, StreamKind};
use super::{Code, Connection, Violation, violation};
use crate::frame::{Frame, FrameError, Lengthless};
use crate::params::TransportParameters;
use crate::version::Version;

/// A chunk of stream data smaller than this fraction of its record is copied out, so that
/// a few bytes kept unread do not hold a whole record's buffer (a peer could otherwise
/// pin a 64 KB record per byte of credit).
const COPY_BELOW_FRACTION: usize = 4;

impl Connection {
    /// Takes one record's frames (a WebSocket message, a record off a byte stream, or on
    /// draft-00 one frame) received `now`. A breach of the protocol closes the connection
    /// with the transport error the draft names; nothing more is read after it.
    pub fn handle_record(&mut self, record: Bytes, now: Instant) {
        if self.closed.is_some() {
            return;
        }
        let size = record.len();
        if size as u64
            > self
                .config
                .max_record_size
                .max(crate::params::DEFAULT_MAX_RECORD_SIZE)
        {
            let reason = format!("a record of {size} bytes is over this side's limit");
            self.fail(violation(Code::FrameEncoding, reason), 0);
            return;
        }
        self.bytes_received += size as u64;
        self.last_heard = self.last_heard.max(now);
        let mut frames = record.clone();
        while !frames.is_empty() && self.closed.is_none() {
            let frame = match Frame::decode(&mut frames, Lengthless::RunsToEnd) {
                Ok(frame) => frame,
                Err(error) => {
                    let code = match error {
                        FrameError::NotNegotiated(_) => Code::ProtocolViolation,
                        _ => Code::FrameEncoding,
                    };
                    self.fail(violation(code, error.to_string()), 0);
                    return;
                }
            };
            let frame_type = frame_type(&frame);
            if let Err(violation) = self.handle_frame(frame, &record) {
                self.fail(violation, frame_type);
            }
        }
    }

    fn handle_frame(&mut self, frame: Frame, record: &Bytes) -> Result<(), Violation> {
        let first = self.peer.is_none();
        if let Frame::TransportParameters(parameters) = frame {
            if !first {
                return Err(self.misplaced_parameters("a second QX_TRANSPORT_PARAMETERS"));
            }
            let parameters = TransportParameters::decode(parameters)
                .map_err(|error| violation(Code::TransportParameter, error.to_string()))?;
            self.handle_parameters(parameters);
            return Ok(());
        }
        if first {
            return Err(self.misplaced_parameters("the first frame is not QX_TRANSPORT_PARAMETERS"));
        }
        match frame {
            Frame::Padding | Frame::TransportParameters(_) => {}
            Frame::Stream {
                id,
                offset,
                data,
                fin,
            } => self.handle_stream(id, offset, data, fin, record.len())?,
            Frame::ResetStream {
                id,
                code,
                final_size,
            } => self.handle_reset(id, code, final_size)?,
            Frame::StopSending { id, code } => self.handle_stop_sending(id, code)?,
            Frame::MaxData(max) => {
                if max > self.send_max_data {
                    self.send_max_data = max;
                    for id in std::mem::take(&mut self.connection_blocked) {
                        self.schedule(id);
                    }
                }
            }
            Frame::MaxStreamData { id, max } => self.handle_max_stream_data(id, max)?,
            Frame::MaxStreams { bidi, max } => {
                if max > 1 << 60 {
                    return Err(violation(Code::FrameEncoding, "MAX_STREAMS past 2^60"));
                }
                let counts = self.counts(!bidi);
                if max > counts.peer_max {
                    counts.peer_max = max;
                    self.openers.wake_all();
                }
            }
            Frame::DataBlocked(_)
            | Frame::StreamDataBlocked { .. }
            | Frame::StreamsBlocked { .. } => {
                // The peer waits on credit this side gives as the application reads.
            }
            Frame::ConnectionClose {
                application,
                code,
                reason,
                ..
            } => {
                let reason = String::from_utf8_lossy(&reason).into_owned();
                tracing::debug!(application, code, %reason, "the QMux peer closed the connection");
                let error = match application {
                    true => TransportError::Closed {
                        code,
                        reason,
                        remote: true,
                    },
                    false => TransportError::Lost(format!(
                        "the peer closed the connection with transport error {code:#x}: {reason}"
                    )),
                };
                self.set_closed(error);
            }
            Frame::PingRequest(sequence) => {
                if self.peer_ping.is_some_and(|last| sequence <= last) {
                    return Err(violation(
                        Code::ProtocolViolation,
                        "a QX_PING sequence number went back",
                    ));
                }
                self.peer_ping = Some(sequence);
                self.pong_owed = Some(sequence);
                self.wake_driver();
            }
            Frame::PingResponse(sequence) => {
                if sequence > self.pings_sent {
                    return Err(violation(
                        Code::ProtocolViolation,
                        "an answer to a QX_PING never sent",
                    ));
                }
                if let Some((sent, at)) = self.ping_sent
                    && sent == sequence
                {
                    self.rtt = Some(self.last_heard.saturating_duration_since(at));
                    self.ping_sent = None;
                }
            }
        }
        Ok(())
    }

    /// spec: -01 §4.2 names TRANSPORT_PARAMETER_ERROR for parameters out of place, -02
    /// PROTOCOL_VIOLATION.
    fn misplaced_parameters(&self, what: &str) -> Violation {
        let code = match self.version {
            Version::Draft02 => Code::ProtocolViolation,
            _ => Code::TransportParameter,
        };
        violation(code, what)
    }

    fn handle_parameters(&mut self, parameters: TransportParameters) {
        self.send_max_data = parameters.initial_max_data;
        self.bidi.peer_max = parameters.initial_max_streams_bidi;
        self.uni.peer_max = parameters.initial_max_streams_uni;
        tracing::trace!(?parameters, "QMux peer's transport parameters");
        self.peer = Some(parameters);
        self.openers.wake_all();
        self.acceptors.wake_all();
        self.wake_driver();
    }

    /// The receiving half of stream `id`, creating the peer's streams up to it (RFC 9000
    /// §3.2: opening a stream opens the lower ones of its kind); `None` for a stream of
    /// the peer's that is already forgotten.
    fn recv_half(&mut self, id: u64, what: &str) -> Result<Option<&mut RecvHalf>, Violation> {
        let kind = StreamKind::of(id);
        let local = kind == self.local_kind(kind.uni);
        if local {
            if kind.uni {
                return Err(violation(
                    Code::StreamState,
                    format!("{what} on a stream this side sends only"),
                ));
            }
            if StreamKind::of(id).index(id) >= self.counts(false).opened {
                return Err(violation(
                    Code::StreamState,
                    format!("{what} on a stream not opened yet"),
                ));
            }
        } else {
            self.open_peer_streams(id)?;
        }
        Ok(self
            .streams
            .get_mut(&id)
            .and_then(|stream| stream.recv.as_mut()))
    }

    fn open_peer_streams(&mut self, id: u64) -> Result<(), Violation> {
        let kind = StreamKind::of(id);
        let index = kind.index(id);
        let stream_window = self.config.stream_window;
        let counts = self.counts(kind.uni);
        if index < counts.peer_opened {
            return Ok(());
        }
        if index >= counts.max {
            return Err(violation(
                Code::StreamLimit,
                format!("stream {id} is past the limit of {}", counts.max),
            ));
        }
        let first = counts.peer_opened;
        counts.peer_opened = index + 1;
        for index in first..=index {
            let id = kind.id(index);
            let stream = Stream {
                recv: Some(RecvHalf {
                    max: stream_window,
                    ..RecvHalf::default()
                }),
                // The peer's bidirectional stream: its limit for us is its
                // `initial_max_stream_data_bidi_local`.
                send: (!kind.uni).then(|| SendHalf {
                    max: self
                        .peer
                        .as_ref()
                        .map_or(0, |peer| peer.initial_max_stream_data_bidi_local),
                    ..SendHalf::default()
                }),
                ..Stream::default()
            };
            self.streams.insert(id, stream);
            match kind.uni {
                true => self.incoming_uni.push_back(id),
                false => self.incoming_bidi.push_back(id),
            }
        }
        self.acceptors.wake_all();
        Ok(())
    }

    fn handle_stream(
        &mut self,
        id: u64,
        offset: u64,
        data: Bytes,
        fin: bool,
        record_len: usize,
    ) -> Result<(), Violation> {
        let len = data.len() as u64;
        let connection_room = self.max_data - self.received_data;
        let Some(recv) = self.recv_half(id, "STREAM")? else {
            return Ok(());
        };
        // spec: -02 §4.1, each stream's bytes arrive in order.
        if offset != recv.offset {
            return Err(violation(
                Code::ProtocolViolation,
                format!(
                    "stream {id}'s data at {offset}, expected at {}",
                    recv.offset
                ),
            ));
        }
        let end = offset + len;
        if (recv.fin || recv.reset.is_some()) && (len > 0 || !fin) {
            return Err(violation(
                Code::FinalSize,
                format!("data on stream {id} past its final size"),
            ));
        }
        if end > recv.max {
            return Err(violation(
                Code::FlowControl,
                format!("stream {id} past its limit of {}", recv.max),
            ));
        }
        if len > connection_room {
            return Err(violation(
                Code::FlowControl,
                "data past the connection's limit",
            ));
        }
        recv.offset = end;
        recv.fin |= fin;
        let discard = recv.released || recv.done;
        if len > 0 && !discard {
            let chunk = match data.len() * COPY_BELOW_FRACTION < record_len {
                true => Bytes::copy_from_slice(&data),
                false => data,
            };
            recv.chunks.push_back(chunk);
        }
        if discard {
            recv.read = end;
        }
        let reader = recv.reader.take();
        self.wakers.extend(reader);
        self.received_data += len;
        if discard {
            self.consumed(len);
            self.forget_if_finished(id);
        }
        Ok(())
    }

    fn handle_reset(&mut self, id: u64, code: u64, final_size: u64) -> Result<(), Violation> {
        let connection_room = self.max_data - self.received_data;
        let Some(recv) = self.recv_half(id, "RESET_STREAM")? else {
            return Ok(());
        };
        if final_size < recv.offset || (recv.fin && final_size != recv.offset) {
            return Err(violation(
                Code::FinalSize,
                format!("stream {id} reset at {final_size}, below what arrived"),
            ));
        }
        let unseen = final_size - recv.offset;
        if final_size > recv.max || unseen > connection_room {
            return Err(violation(
                Code::FlowControl,
                format!("stream {id} reset past its limit"),
            ));
        }
        if recv.reset.is_some() || recv.fin {
            return Ok(());
        }
        // Every byte up to the final size counts, read or not (RFC 9000 §4.5); what was
        // not read is discarded and its credit given back.
        let unread = final_size - recv.read;
        recv.offset = final_size;
        recv.read = final_size;
        recv.reset = Some(code);
        recv.chunks.clear();
        let reader = recv.reader.take();
        self.wakers.extend(reader);
        self.received_data += unseen;
        self.consumed(unread);
        self.forget_if_finished(id);
        Ok(())
    }

    fn handle_stop_sending(&mut self, id: u64, code: u64) -> Result<(), Violation> {
        let kind = StreamKind::of(id);
        let local = kind == self.local_kind(kind.uni);
        if !local && kind.uni {
            return Err(violation(
                Code::StreamState,
                "STOP_SENDING on a stream this side receives only",
            ));
        }
        if local && kind.index(id) >= self.counts(kind.uni).opened {
            return Err(violation(
                Code::StreamState,
                "STOP_SENDING on a stream not opened yet",
            ));
        }
        if !local {
            self.open_peer_streams(id)?;
        }
        let Some(stream) = self.streams.get_mut(&id) else {
            return Ok(());
        };
        let Some(send) = stream.send.as_mut() else {
            return Ok(());
        };
        if send.stopped.is_some() {
            return Ok(());
        }
        send.stopped = Some(code);
        self.wakers.extend(send.writer.take());
        self.wakers.extend(send.stop_watcher.take());
        if !send.done {
            // RFC 9000 §3.5: answer with RESET_STREAM, carrying the peer's code.
            self.reset_send(id, code);
        }
        Ok(())
    }

    fn handle_max_stream_data(&mut self, id: u64, max: u64) -> Result<(), Violation> {
        let kind = StreamKind::of(id);
        let local = kind == self.local_kind(kind.uni);
        if !local && kind.uni {
            return Err(violation(
                Code::StreamState,
                "MAX_STREAM_DATA on a stream this side receives only",
            ));
        }
        if !local {
            self.open_peer_streams(id)?;
        }
        let Some(send) = self
            .streams
            .get_mut(&id)
            .and_then(|stream| stream.send.as_mut())
        else {
            return Ok(());
        };
        if max > send.max {
            send.max = max;
            send.blocked_at = None;
            self.wakers.extend(send.writer.take());
            self.schedule(id);
        }
        Ok(())
    }

    /// `len` more bytes were read or discarded: once half the connection's window is used
    /// up, the peer gets a new limit (MAX_DATA).
    pub(super) fn consumed(&mut self, len: u64) {
        self.consumed_data += len;
        let window = self.config.connection_window;
        let max = self.consumed_data + window;
        if max - self.max_data >= window / 2 {
            self.max_data = max;
            self.queue_control(Frame::MaxData(max));
        }
    }
}

impl StreamKind {
    /// The stream's index among those of its kind.
    pub(crate) fn index(self, id: u64) -> u64 {
        id >> 2
    }
}

/// The type byte(s) of a frame, for a transport CONNECTION_CLOSE's Frame Type.
fn frame_type(frame: &Frame) -> u64 {
    match frame {
        Frame::Padding => 0x00,
        Frame::ResetStream { .. } => 0x04,
        Frame::StopSending { .. } => 0x05,
        Frame::Stream { .. } => 0x08,
        Frame::MaxData(_) => 0x10,
        Frame::MaxStreamData { .. } => 0x11,
        Frame::MaxStreams { bidi, .. } => {
            if *bidi {
                0x12
            } else {
                0x13
            }
        }
        Frame::DataBlocked(_) => 0x14,
        Frame::StreamDataBlocked { .. } => 0x15,
        Frame::StreamsBlocked { bidi, .. } => {
            if *bidi {
                0x16
            } else {
                0x17
            }
        }
        Frame::ConnectionClose { application, .. } => {
            if *application {
                0x1d
            } else {
                0x1c
            }
        }
        Frame::TransportParameters(_) => crate::frame::QX_TRANSPORT_PARAMETERS,
        Frame::PingRequest(_) => crate::frame::QX_PING_REQUEST,
        Frame::PingResponse(_) => crate::frame::QX_PING_RESPONSE,
    }
}
