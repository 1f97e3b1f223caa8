//! What a WebTransport session's CONNECT stream carries after its headers: HTTP/3 frames
//! whose DATA payloads are capsules (RFC 9297 §3.2), of which only the
//! CLOSE_WEBTRANSPORT_SESSION capsule means anything here. Parsing is sans-IO: bytes in,
//! the close (or why the stream is malformed) out, with what is held bounded.

use bytes::{Buf, BytesMut};
use web_transport_proto::{Capsule, CapsuleError, Frame, VarInt};

use crate::MAX_HEADER_BYTES;

/// Frames and capsules read from a CONNECT stream, not yet parsed.
#[derive(Debug, Default)]
pub struct CapsuleReader {
    /// Frames read and not yet parsed.
    frames: BytesMut,
    /// DATA payload not yet parsed into capsules.
    capsules: BytesMut,
}

impl CapsuleReader {
    /// Takes bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.frames.extend_from_slice(bytes);
    }

    /// How many bytes it holds, not yet parsed: at most one frame and one capsule of
    /// [`MAX_HEADER_BYTES`], with their headers, whatever arrives.
    pub fn held(&self) -> usize {
        self.frames.len() + self.capsules.len()
    }

    /// Moves DATA payloads into the capsule buffer and decodes capsules: the close (code
    /// and reason) once it arrived; `Err` with why, for a malformed stream.
    ///
    /// Bounded: a frame longer than `MAX_HEADER_BYTES` is refused; a capsule declaring
    /// more than 64 KiB is refused by `web-transport-proto` as its length arrives, and one
    /// that is all here yet does not decode (a CLOSE shorter than its code) is malformed.
    /// Before, a short CLOSE read as "need more bytes" forever while DATA kept being
    /// appended. (The size check below is a second line, should the library's go.)
    pub fn close(&mut self) -> Result<Option<(u32, String)>, String> {
        loop {
            let mut cursor = &self.frames[..];
            let (Ok(kind), Ok(len)) = (VarInt::decode(&mut cursor), VarInt::decode(&mut cursor))
            else {
                break;
            };
            let len = usize::try_from(len.into_inner()).unwrap_or(usize::MAX);
            if len > MAX_HEADER_BYTES {
                return Err(format!("a {len}-byte frame on the CONNECT stream"));
            }
            if cursor.len() < len {
                break;
            }
            if Frame(kind) == Frame::DATA {
                self.capsules.extend_from_slice(&cursor[..len]);
            }
            let consumed = self.frames.len() - cursor.len() + len;
            self.frames.advance(consumed);
        }
        loop {
            let whole = declared_whole(&self.capsules);
            let mut cursor = &self.capsules[..];
            match Capsule::decode(&mut cursor) {
                Ok(Capsule::CloseWebTransportSession { code, reason }) => {
                    return Ok(Some((code, reason)));
                }
                Ok(_) => {
                    let consumed = self.capsules.len() - cursor.len();
                    self.capsules.advance(consumed);
                }
                Err(CapsuleError::UnexpectedEnd | CapsuleError::VarInt(_)) if !whole => {
                    if self.capsules.len() > MAX_HEADER_BYTES {
                        return Err("a capsule over the size limit".into());
                    }
                    return Ok(None);
                }
                Err(error) => return Err(format!("a bad capsule: {error}")),
            }
        }
    }
}

/// Whether the capsule at the front of `bytes` is all there, by its declared length.
fn declared_whole(bytes: &[u8]) -> bool {
    let mut cursor = bytes;
    match (VarInt::decode(&mut cursor), VarInt::decode(&mut cursor)) {
        (Ok(_), Ok(len)) => cursor.len() as u64 >= len.into_inner(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;

    /// A DATA frame carrying `payload`.
    fn data(payload: &[u8]) -> Vec<u8> {
        let mut frame = BytesMut::new();
        Frame::DATA.encode(&mut frame);
        VarInt::try_from(payload.len() as u64)
            .unwrap()
            .encode(&mut frame);
        frame.put_slice(payload);
        frame.to_vec()
    }

    fn close_capsule(code: u32, reason: &str) -> Vec<u8> {
        let mut capsule = BytesMut::new();
        Capsule::CloseWebTransportSession {
            code,
            reason: reason.into(),
        }
        .encode(&mut capsule);
        capsule.to_vec()
    }

    #[test]
    fn a_close_split_across_frames_and_reads_is_found() {
        let capsule = close_capsule(7, "bye");
        let (first, second) = capsule.split_at(3);
        let mut reader = CapsuleReader::default();
        let mut bytes = data(first);
        bytes.extend(data(second));
        for byte in &bytes[..bytes.len() - 1] {
            reader.push(std::slice::from_ref(byte));
            assert_eq!(reader.close(), Ok(None));
        }
        reader.push(&bytes[bytes.len() - 1..]);
        assert_eq!(reader.close(), Ok(Some((7, "bye".into()))));
    }

    /// Regression: a CLOSE capsule declaring 2 bytes (shorter than its 4-byte code) read as
    /// "need more bytes" forever, while the DATA that kept coming was held.
    #[test]
    fn a_close_shorter_than_its_code_is_malformed_not_pending() {
        let short_close = [0x68, 0x43, 0x02, 0x00, 0x01]; // type 0x2843, length 2
        let mut reader = CapsuleReader::default();
        reader.push(&data(&short_close));
        assert!(reader.close().is_err());
    }

    #[test]
    fn a_capsule_longer_than_the_limit_is_refused_as_its_length_arrives() {
        let mut reader = CapsuleReader::default();
        // A capsule of an unknown type declaring 1 GiB: refused before any of it is held.
        let mut head = BytesMut::new();
        VarInt::from_u32(0x1234).encode(&mut head);
        VarInt::from_u32(1 << 30).encode(&mut head);
        reader.push(&data(&head));
        assert!(reader.close().is_err());
        assert!(reader.capsules.len() <= head.len());
    }
}
