//! The QUIC frames QMux carries, and its two frames of its own, encoded as QUIC version 1
//! encodes them (RFC 9000 §19; spec: draft-ietf-quic-qmux-02 §4).
//!
//! Decoding is from a [`Bytes`] holding whole frames (a record's Frames field, or on
//! draft-00 the bytes read so far): STREAM data and reasons are slices of it, not copies.
//! A frame that does not end within the bytes given is [`FrameError::Short`], which on a
//! record is a malformed record (FRAME_ENCODING_ERROR) and on draft-00's bare frames means
//! "read more".

use bytes::{Buf, BufMut, Bytes, BytesMut};
use moqx_net::coding::varint::{read_varint, varint_len, write_varint};

/// QX_TRANSPORT_PARAMETERS: the first frame each side sends (spec: -02 §4.2). On the
/// wire it reads "\xffQS0\r\n\r\n" (the draft's prose says "QMX", its code point and
/// every deployed peer say otherwise), which tells QMux apart from HTTP/1.1 and HTTP/2.
pub const QX_TRANSPORT_PARAMETERS: u64 = 0x3f51_5330_0d0a_0d0a;
/// QX_PING asking the peer to answer (spec: -01 and -02 §4.3).
pub const QX_PING_REQUEST: u64 = 0x348c_6752_9ef8_c7bd;
/// QX_PING answering one.
pub const QX_PING_RESPONSE: u64 = 0x348c_6752_9ef8_c7be;

/// The STREAM frame's type bits (RFC 9000 §19.8).
const STREAM_BASE: u64 = 0x08;
const STREAM_OFF: u64 = 0x04;
const STREAM_LEN: u64 = 0x02;
const STREAM_FIN: u64 = 0x01;

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// PADDING (0x00): a run of them decodes as one.
    Padding,
    /// RESET_STREAM (0x04): the sender abandons a stream.
    ResetStream {
        /// The stream.
        id: u64,
        /// The application's error code.
        code: u64,
        /// The stream's final size: every byte it ever sent.
        final_size: u64,
    },
    /// STOP_SENDING (0x05): the receiver asks the sender to stop.
    StopSending {
        /// The stream.
        id: u64,
        /// The application's error code.
        code: u64,
    },
    /// STREAM (0x08 to 0x0f): bytes of a stream, and perhaps its end.
    Stream {
        /// The stream.
        id: u64,
        /// Where in the stream `data` starts.
        offset: u64,
        /// The bytes.
        data: Bytes,
        /// The stream ends after them.
        fin: bool,
    },
    /// MAX_DATA (0x10): the connection's new receive limit.
    MaxData(u64),
    /// MAX_STREAM_DATA (0x11): a stream's new receive limit.
    MaxStreamData {
        /// The stream.
        id: u64,
        /// Bytes the sender may send on it, counted from its start.
        max: u64,
    },
    /// MAX_STREAMS (0x12 bidirectional, 0x13 unidirectional).
    MaxStreams {
        /// Bidirectional streams (else unidirectional).
        bidi: bool,
        /// How many the peer may open in all.
        max: u64,
    },
    /// DATA_BLOCKED (0x14): the sender is held by the connection's limit.
    DataBlocked(u64),
    /// STREAM_DATA_BLOCKED (0x15): the sender is held by a stream's limit.
    StreamDataBlocked {
        /// The stream.
        id: u64,
        /// The limit it is held at.
        limit: u64,
    },
    /// STREAMS_BLOCKED (0x16 bidirectional, 0x17 unidirectional).
    StreamsBlocked {
        /// Bidirectional streams (else unidirectional).
        bidi: bool,
        /// The limit it is held at.
        limit: u64,
    },
    /// CONNECTION_CLOSE (0x1c for a transport error, 0x1d for the application's).
    ConnectionClose {
        /// The application closed it (0x1d), else the transport (0x1c).
        application: bool,
        /// The error code.
        code: u64,
        /// The frame type that caused a transport error (0 when none); absent from 0x1d.
        frame_type: u64,
        /// The reason phrase, as sent (UTF-8 by convention, not checked).
        reason: Bytes,
    },
    /// QX_TRANSPORT_PARAMETERS: the sender's transport parameters, undecoded
    /// ([`TransportParameters::decode`](crate::TransportParameters::decode)).
    TransportParameters(Bytes),
    /// QX_PING asking for an answer, with its sequence number.
    PingRequest(u64),
    /// QX_PING answering the request with this sequence number.
    PingResponse(u64),
}

/// Why bytes are not a frame QMux allows here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The frame does not end within the bytes given.
    #[error("the frame is cut short")]
    Short,
    /// A QUIC frame QMux forbids (ACK, CRYPTO, PING, connection IDs, path probes…): spec
    /// -02 §4 says FRAME_ENCODING_ERROR.
    #[error("frame type {0:#x} is prohibited in QMux")]
    Prohibited(u64),
    /// A frame whose extension was not negotiated (DATAGRAM, RESET_STREAM_AT: this side
    /// offers neither).
    #[error("frame type {0:#x} belongs to an extension that was not negotiated")]
    NotNegotiated(u64),
    /// A frame type nobody defined.
    #[error("unknown frame type {0:#x}")]
    Unknown(u64),
    /// A field out of its range (an offset plus length past 2^62).
    #[error("{0} out of range")]
    InvalidValue(&'static str),
}

/// What ends a STREAM frame sent without its Length field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lengthless {
    /// The end of the bytes given: a record's end (draft-01 and later, and a WebSocket
    /// message on draft-00).
    RunsToEnd,
    /// Nothing: on draft-00's bare byte stream such a frame has no end we can find, and is
    /// refused as FRAME_ENCODING_ERROR.
    Refused,
}

impl Frame {
    /// Decodes the frame at the front of `buf`, advancing past it.
    pub fn decode(buf: &mut Bytes, lengthless: Lengthless) -> Result<Self, FrameError> {
        let kind = varint(buf)?;
        Ok(match kind {
            0x00 => {
                // A run of padding is one frame: skip to the next non-zero byte.
                let run = buf.iter().take_while(|&&byte| byte == 0).count();
                buf.advance(run);
                Self::Padding
            }
            0x04 => Self::ResetStream {
                id: varint(buf)?,
                code: varint(buf)?,
                final_size: varint(buf)?,
            },
            0x05 => Self::StopSending {
                id: varint(buf)?,
                code: varint(buf)?,
            },
            0x08..=0x0f => decode_stream(kind, buf, lengthless)?,
            0x10 => Self::MaxData(varint(buf)?),
            0x11 => Self::MaxStreamData {
                id: varint(buf)?,
                max: varint(buf)?,
            },
            0x12 | 0x13 => Self::MaxStreams {
                bidi: kind == 0x12,
                max: varint(buf)?,
            },
            0x14 => Self::DataBlocked(varint(buf)?),
            0x15 => Self::StreamDataBlocked {
                id: varint(buf)?,
                limit: varint(buf)?,
            },
            0x16 | 0x17 => Self::StreamsBlocked {
                bidi: kind == 0x16,
                limit: varint(buf)?,
            },
            0x1c | 0x1d => {
                let application = kind == 0x1d;
                let code = varint(buf)?;
                let frame_type = if application { 0 } else { varint(buf)? };
                let reason = length_prefixed(buf)?;
                Self::ConnectionClose {
                    application,
                    code,
                    frame_type,
                    reason,
                }
            }
            QX_TRANSPORT_PARAMETERS => Self::TransportParameters(length_prefixed(buf)?),
            QX_PING_REQUEST => Self::PingRequest(varint(buf)?),
            QX_PING_RESPONSE => Self::PingResponse(varint(buf)?),
            // PING, ACK (two types), CRYPTO, NEW_TOKEN, NEW_CONNECTION_ID,
            // RETIRE_CONNECTION_ID, PATH_CHALLENGE, PATH_RESPONSE, HANDSHAKE_DONE.
            0x01..=0x03 | 0x06 | 0x07 | 0x18..=0x1b | 0x1e => {
                return Err(FrameError::Prohibited(kind));
            }
            // RESET_STREAM_AT, DATAGRAM (two types): extensions this side never offers.
            0x24 | 0x30 | 0x31 => return Err(FrameError::NotNegotiated(kind)),
            other => return Err(FrameError::Unknown(other)),
        })
    }

    /// Appends the frame's encoding to `buf`. STREAM frames always carry their Length
    /// (valid on every draft and every carrier).
    pub fn encode(&self, buf: &mut BytesMut) {
        match self {
            Self::Padding => buf.put_u8(0),
            Self::ResetStream {
                id,
                code,
                final_size,
            } => put(buf, &[0x04, *id, *code, *final_size]),
            Self::StopSending { id, code } => put(buf, &[0x05, *id, *code]),
            Self::Stream {
                id,
                offset,
                data,
                fin,
            } => {
                encode_stream_header(buf, *id, *offset, data.len(), *fin);
                buf.put_slice(data);
            }
            Self::MaxData(max) => put(buf, &[0x10, *max]),
            Self::MaxStreamData { id, max } => put(buf, &[0x11, *id, *max]),
            Self::MaxStreams { bidi, max } => put(buf, &[if *bidi { 0x12 } else { 0x13 }, *max]),
            Self::DataBlocked(limit) => put(buf, &[0x14, *limit]),
            Self::StreamDataBlocked { id, limit } => put(buf, &[0x15, *id, *limit]),
            Self::StreamsBlocked { bidi, limit } => {
                put(buf, &[if *bidi { 0x16 } else { 0x17 }, *limit])
            }
            Self::ConnectionClose {
                application,
                code,
                frame_type,
                reason,
            } => {
                if *application {
                    put(buf, &[0x1d, *code]);
                } else {
                    put(buf, &[0x1c, *code, *frame_type]);
                }
                put(buf, &[reason.len() as u64]);
                buf.put_slice(reason);
            }
            Self::TransportParameters(parameters) => {
                put(buf, &[QX_TRANSPORT_PARAMETERS, parameters.len() as u64]);
                buf.put_slice(parameters);
            }
            Self::PingRequest(sequence) => put(buf, &[QX_PING_REQUEST, *sequence]),
            Self::PingResponse(sequence) => put(buf, &[QX_PING_RESPONSE, *sequence]),
        }
    }

    /// The bytes [`encode`](Self::encode) appends.
    pub fn encoded_len(&self) -> usize {
        let lens = |values: &[u64]| values.iter().map(|&value| varint_len(value)).sum::<usize>();
        match self {
            Self::Padding => 1,
            Self::ResetStream {
                id,
                code,
                final_size,
            } => lens(&[0x04, *id, *code, *final_size]),
            Self::StopSending { id, code } => lens(&[0x05, *id, *code]),
            Self::Stream {
                id, offset, data, ..
            } => stream_header_len(*id, *offset, data.len()) + data.len(),
            Self::MaxData(max) => lens(&[0x10, *max]),
            Self::MaxStreamData { id, max } => lens(&[0x11, *id, *max]),
            Self::MaxStreams { max, .. } => lens(&[0x12, *max]),
            Self::DataBlocked(limit) => lens(&[0x14, *limit]),
            Self::StreamDataBlocked { id, limit } => lens(&[0x15, *id, *limit]),
            Self::StreamsBlocked { limit, .. } => lens(&[0x16, *limit]),
            Self::ConnectionClose {
                application,
                code,
                frame_type,
                reason,
            } => {
                let fields = match application {
                    true => lens(&[0x1d, *code]),
                    false => lens(&[0x1c, *code, *frame_type]),
                };
                fields + lens(&[reason.len() as u64]) + reason.len()
            }
            Self::TransportParameters(parameters) => {
                lens(&[QX_TRANSPORT_PARAMETERS, parameters.len() as u64]) + parameters.len()
            }
            Self::PingRequest(sequence) => lens(&[QX_PING_REQUEST, *sequence]),
            Self::PingResponse(sequence) => lens(&[QX_PING_RESPONSE, *sequence]),
        }
    }
}

/// Appends a STREAM frame's header (with its Length) for `len` bytes of data, which the
/// caller appends next.
pub fn encode_stream_header(buf: &mut BytesMut, id: u64, offset: u64, len: usize, fin: bool) {
    let mut kind = STREAM_BASE | STREAM_LEN;
    if offset > 0 {
        kind |= STREAM_OFF;
    }
    if fin {
        kind |= STREAM_FIN;
    }
    put(buf, &[kind, id]);
    if offset > 0 {
        put(buf, &[offset]);
    }
    put(buf, &[len as u64]);
}

/// The bytes a STREAM frame's header takes (type, ID, offset if not 0, length) ahead of
/// `len` bytes of data.
pub fn stream_header_len(id: u64, offset: u64, len: usize) -> usize {
    let offset = if offset > 0 { varint_len(offset) } else { 0 };
    1 + varint_len(id) + offset + varint_len(len as u64)
}

/// The most data a STREAM frame of stream `id` at `offset` carries within `room` bytes
/// (0 when not even its header fits).
pub fn stream_data_room(id: u64, offset: u64, room: usize) -> usize {
    let fixed = stream_header_len(id, offset, 0) - 1;
    // The length field widens with the length: the best of each width's largest fit.
    [
        (1usize, 63u64),
        (2, 16_383),
        (4, (1 << 30) - 1),
        (8, (1 << 62) - 1),
    ]
    .into_iter()
    .map(|(width, most)| (room.saturating_sub(fixed + width) as u64).min(most) as usize)
    .filter(|&data| fixed + varint_len(data as u64) + data <= room)
    .max()
    .unwrap_or(0)
}

fn decode_stream(kind: u64, buf: &mut Bytes, lengthless: Lengthless) -> Result<Frame, FrameError> {
    let id = varint(buf)?;
    let offset = if kind & STREAM_OFF != 0 {
        varint(buf)?
    } else {
        0
    };
    let len = if kind & STREAM_LEN != 0 {
        let len = varint(buf)?;
        usize::try_from(len).map_err(|_| FrameError::Short)?
    } else {
        match lengthless {
            Lengthless::RunsToEnd => buf.remaining(),
            Lengthless::Refused => return Err(FrameError::InvalidValue("a STREAM frame's end")),
        }
    };
    if buf.remaining() < len {
        return Err(FrameError::Short);
    }
    // RFC 9000 §19.8: offset + length may not exceed 2^62 - 1.
    if offset.saturating_add(len as u64) > moqx_net::coding::varint::MAX_VARINT {
        return Err(FrameError::InvalidValue(
            "a STREAM frame's offset and length",
        ));
    }
    Ok(Frame::Stream {
        id,
        offset,
        data: buf.split_to(len),
        fin: kind & STREAM_FIN != 0,
    })
}

fn varint(buf: &mut Bytes) -> Result<u64, FrameError> {
    read_varint(buf).map_err(|_| FrameError::Short)
}

fn length_prefixed(buf: &mut Bytes) -> Result<Bytes, FrameError> {
    let len = usize::try_from(varint(buf)?).map_err(|_| FrameError::Short)?;
    if buf.remaining() < len {
        return Err(FrameError::Short);
    }
    Ok(buf.split_to(len))
}

/// Writes each value as a varint. Every value here is a frame type below 2^62, a stream
/// ID, offset, count or code this crate produced (all below 2^62), or a length of bytes
/// in memory; a value past 2^62 would be a bug of ours, written as the largest varint
/// rather than panicking.
fn put(buf: &mut BytesMut, values: &[u64]) {
    for &value in values {
        let value = value.min(moqx_net::coding::varint::MAX_VARINT);
        // Cannot fail: `value` is at most MAX_VARINT.
        let _ = write_varint(buf, value, "frame field");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(frame: &Frame) -> Frame {
        let mut buf = BytesMut::new();
        frame.encode(&mut buf);
        assert_eq!(buf.len(), frame.encoded_len(), "{frame:?}");
        let mut bytes = buf.freeze();
        let decoded = Frame::decode(&mut bytes, Lengthless::RunsToEnd).expect("decodes");
        assert!(bytes.is_empty(), "{frame:?} left {} bytes", bytes.len());
        decoded
    }

    fn varint_value() -> impl Strategy<Value = u64> {
        prop_oneof![0u64..64, 0u64..16_384, 0u64..(1 << 30), 0u64..(1 << 62)]
    }

    fn any_frame() -> impl Strategy<Value = Frame> {
        let bytes = proptest::collection::vec(any::<u8>(), 0..64).prop_map(Bytes::from);
        prop_oneof![
            (varint_value(), varint_value(), varint_value()).prop_map(|(id, code, final_size)| {
                Frame::ResetStream {
                    id,
                    code,
                    final_size,
                }
            }),
            (varint_value(), varint_value()).prop_map(|(id, code)| Frame::StopSending { id, code }),
            (
                varint_value(),
                0u64..(1 << 40),
                bytes.clone(),
                any::<bool>()
            )
                .prop_map(|(id, offset, data, fin)| Frame::Stream {
                    id,
                    offset,
                    data,
                    fin
                }),
            varint_value().prop_map(Frame::MaxData),
            (varint_value(), varint_value()).prop_map(|(id, max)| Frame::MaxStreamData { id, max }),
            (any::<bool>(), varint_value()).prop_map(|(bidi, max)| Frame::MaxStreams { bidi, max }),
            varint_value().prop_map(Frame::DataBlocked),
            (varint_value(), varint_value())
                .prop_map(|(id, limit)| Frame::StreamDataBlocked { id, limit }),
            (any::<bool>(), varint_value())
                .prop_map(|(bidi, limit)| Frame::StreamsBlocked { bidi, limit }),
            (any::<bool>(), varint_value(), varint_value(), bytes.clone()).prop_map(
                |(application, code, frame_type, reason)| Frame::ConnectionClose {
                    application,
                    code,
                    frame_type: if application { 0 } else { frame_type },
                    reason,
                }
            ),
            bytes.prop_map(Frame::TransportParameters),
            varint_value().prop_map(Frame::PingRequest),
            varint_value().prop_map(Frame::PingResponse),
        ]
    }

    proptest! {
        #[test]
        fn every_frame_round_trips(frame in any_frame()) {
            prop_assert_eq!(round_trip(&frame), frame);
        }

        #[test]
        fn every_frame_cut_short_is_short(frame in any_frame(), cut in 1usize..8) {
            let mut buf = BytesMut::new();
            frame.encode(&mut buf);
            let keep = buf.len().saturating_sub(cut);
            let mut bytes = buf.freeze().slice(..keep);
            // A cut STREAM frame with an explicit length is short; an empty prefix is short.
            match Frame::decode(&mut bytes, Lengthless::Refused) {
                Err(FrameError::Short) => {}
                other => prop_assert!(false, "{:?} cut to {} bytes gave {:?}", frame, keep, other),
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut bytes = Bytes::from(bytes);
            while !bytes.is_empty() {
                if Frame::decode(&mut bytes, Lengthless::RunsToEnd).is_err() {
                    break;
                }
            }
        }

        #[test]
        fn stream_data_room_fills_but_never_overflows(id in varint_value(), offset in 0u64..(1 << 40), room in 0usize..70_000) {
            let data = stream_data_room(id, offset, room);
            if data > 0 {
                prop_assert!(stream_header_len(id, offset, data) + data <= room);
            }
            prop_assert!(stream_header_len(id, offset, data + 1) + data + 1 > room);
        }
    }

    #[test]
    fn the_transport_parameters_type_is_eight_bytes_no_http_request_starts_with() {
        let mut buf = BytesMut::new();
        Frame::TransportParameters(Bytes::new()).encode(&mut buf);
        assert_eq!(&buf[..8], b"\xffQS0\r\n\r\n");
    }

    #[test]
    fn a_lengthless_stream_frame_runs_to_the_end_of_its_record() {
        // STREAM with OFF and FIN, no LEN: id 4, offset 2, then "abc" to the end.
        let mut bytes = Bytes::from_static(&[0x0d, 0x04, 0x02, b'a', b'b', b'c']);
        let frame = Frame::decode(&mut bytes.clone(), Lengthless::RunsToEnd).unwrap();
        assert_eq!(
            frame,
            Frame::Stream {
                id: 4,
                offset: 2,
                data: Bytes::from_static(b"abc"),
                fin: true
            }
        );
        assert_eq!(
            Frame::decode(&mut bytes, Lengthless::Refused),
            Err(FrameError::InvalidValue("a STREAM frame's end"))
        );
    }

    #[test]
    fn quic_frames_qmux_prohibits_are_refused_by_type() {
        for kind in [0x01u8, 0x02, 0x03, 0x06, 0x07, 0x18, 0x19, 0x1a, 0x1b, 0x1e] {
            let mut bytes = Bytes::copy_from_slice(&[kind, 0, 0, 0, 0]);
            assert_eq!(
                Frame::decode(&mut bytes, Lengthless::RunsToEnd),
                Err(FrameError::Prohibited(u64::from(kind)))
            );
        }
        for kind in [0x24u8, 0x30, 0x31] {
            let mut bytes = Bytes::copy_from_slice(&[kind, 0, 0]);
            assert_eq!(
                Frame::decode(&mut bytes, Lengthless::RunsToEnd),
                Err(FrameError::NotNegotiated(u64::from(kind)))
            );
        }
        let mut bytes = Bytes::from_static(&[0x21]);
        assert_eq!(
            Frame::decode(&mut bytes, Lengthless::RunsToEnd),
            Err(FrameError::Unknown(0x21))
        );
    }

    #[test]
    fn a_run_of_padding_is_one_frame() {
        let mut bytes = Bytes::from_static(&[0, 0, 0, 0x10, 0x05]);
        assert_eq!(
            Frame::decode(&mut bytes, Lengthless::RunsToEnd),
            Ok(Frame::Padding)
        );
        assert_eq!(
            Frame::decode(&mut bytes, Lengthless::RunsToEnd),
            Ok(Frame::MaxData(5))
        );
    }
}
