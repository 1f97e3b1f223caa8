//! What a peer-opened stream is, read from its first bytes (RFC 9114 §6.2 for uni stream
//! types; draft-ietf-webtrans-http3 §4.2 and §4.3 for WebTransport stream headers), and
//! the headers of the streams we open.

use bytes::{Bytes, BytesMut};
use web_transport_proto::{Frame, StreamUni, VarInt};

/// The kind of a peer-opened unidirectional stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UniKind {
    /// The peer's HTTP/3 control stream (SETTINGS first).
    Control,
    /// A QPACK encoder or decoder stream: read and discarded (we allow no dynamic table).
    Qpack,
    /// A WebTransport stream of the session with this id.
    WebTransport {
        /// The session's id: the stream id of its CONNECT request.
        session: u64,
    },
    /// Anything else (push streams, grease, unknown types): refused.
    Other(u64),
}

/// The kind of a peer-opened bidirectional stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BidiKind {
    /// An HTTP/3 request (a HEADERS frame first): the extended CONNECT. Its header consumes
    /// nothing, so the bytes after it are the whole frame read so far.
    Request,
    /// A WebTransport stream of the session with this id.
    WebTransport {
        /// The session's id: the stream id of its CONNECT request.
        session: u64,
    },
    /// Any other first frame: refused.
    Other(u64),
}

/// Parses a uni stream's header from the start of `bytes`: its kind and the header's
/// length, or `None` when more bytes are needed.
pub fn parse_uni(bytes: &[u8]) -> Option<(UniKind, usize)> {
    let mut cursor = bytes;
    let kind = StreamUni(VarInt::decode(&mut cursor).ok()?);
    let kind = match kind {
        StreamUni::CONTROL => UniKind::Control,
        StreamUni::QPACK_ENCODER | StreamUni::QPACK_DECODER => UniKind::Qpack,
        StreamUni::WEBTRANSPORT => UniKind::WebTransport {
            session: VarInt::decode(&mut cursor).ok()?.into_inner(),
        },
        other => UniKind::Other(other.0.into_inner()),
    };
    Some((kind, bytes.len() - cursor.len()))
}

/// Parses a bidi stream's header from the start of `bytes`, as [`parse_uni`]. A request
/// consumes nothing: its HEADERS frame is decoded whole later.
pub fn parse_bidi(bytes: &[u8]) -> Option<(BidiKind, usize)> {
    let mut cursor = bytes;
    let kind = Frame(VarInt::decode(&mut cursor).ok()?);
    let kind = match kind {
        Frame::HEADERS => return Some((BidiKind::Request, 0)),
        Frame::WEBTRANSPORT => BidiKind::WebTransport {
            session: VarInt::decode(&mut cursor).ok()?.into_inner(),
        },
        other => BidiKind::Other(other.0.into_inner()),
    };
    Some((kind, bytes.len() - cursor.len()))
}

/// The header of a WebTransport uni stream of `session`.
pub fn uni_header(session: u64) -> Bytes {
    encode_pair(StreamUni::WEBTRANSPORT.0, session)
}

/// The header of a WebTransport bidi stream of `session`.
pub fn bidi_header(session: u64) -> Bytes {
    encode_pair(Frame::WEBTRANSPORT.0, session)
}

fn encode_pair(kind: VarInt, session: u64) -> Bytes {
    let mut bytes = BytesMut::with_capacity(16);
    kind.encode(&mut bytes);
    // A QUIC stream id is below 2^62, so it is always a valid varint.
    VarInt::try_from(session)
        .unwrap_or(VarInt::MAX)
        .encode(&mut bytes);
    bytes.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uni_headers_round_trip_and_wait_for_more_bytes() {
        let header = uni_header(4);
        assert_eq!(
            parse_uni(&header),
            Some((UniKind::WebTransport { session: 4 }, header.len()))
        );
        // Every strict prefix asks for more.
        for len in 0..header.len() {
            assert_eq!(parse_uni(&header[..len]), None, "prefix of {len}");
        }
        assert_eq!(parse_uni(&[0x00, 0x04]), Some((UniKind::Control, 1)));
        assert_eq!(parse_uni(&[0x02]), Some((UniKind::Qpack, 1)));
        assert_eq!(parse_uni(&[0x03]), Some((UniKind::Qpack, 1)));
        assert_eq!(parse_uni(&[0x01]), Some((UniKind::Other(1), 1)));
    }

    #[test]
    fn bidi_headers_round_trip_and_requests_consume_nothing() {
        let header = bidi_header(1 << 40);
        assert_eq!(
            parse_bidi(&header),
            Some((BidiKind::WebTransport { session: 1 << 40 }, header.len()))
        );
        assert_eq!(parse_bidi(&[0x01, 0x10]), Some((BidiKind::Request, 0)));
        assert_eq!(parse_bidi(&[0x00]), Some((BidiKind::Other(0), 1)));
        assert_eq!(parse_bidi(&[]), None);
    }
}
