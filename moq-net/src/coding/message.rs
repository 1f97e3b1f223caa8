//! Message framing: `Length (i)` followed by a body of exactly that many bytes (spec:
//! moq-lite-05, "Message framing").

use bytes::{Buf, BufMut};

use super::varint::{read_varint, write_varint};
use super::{DecodeError, EncodeError, Version};

/// A length-prefixed message. Implementors write and read the body; the framing is shared.
///
/// Decoding consumes from `buf` even when it fails; a stream reader decodes from a cursor
/// over its buffered bytes and advances the buffer only on success, keeping the bytes on
/// [`DecodeError::Short`] to retry when more arrive.
pub trait Message: Sized {
    /// Writes the fields, without the length prefix.
    fn encode_body<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError>;

    /// Reads the fields from exactly the body.
    fn decode_body<B: Buf>(buf: &mut B, version: Version) -> Result<Self, DecodeError>;

    /// Writes `Length (i) | body`.
    fn encode<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError> {
        let mut body = Vec::with_capacity(64);
        self.encode_body(&mut body, version)?;
        write_framed(buf, &body)
    }

    /// Reads `Length (i) | body`: [`DecodeError::Short`] until the whole body is there, then
    /// [`DecodeError::Long`] if the fields end before the length does. Fields that run past
    /// the length are `Short` too, as deployed peers report them.
    fn decode<B: Buf>(buf: &mut B, version: Version) -> Result<Self, DecodeError> {
        let len = read_varint(buf)?;
        if (buf.remaining() as u64) < len {
            return Err(DecodeError::Short);
        }
        let mut body = buf.take(len as usize);
        let message = Self::decode_body(&mut body, version)?;
        if body.has_remaining() {
            return Err(DecodeError::Long);
        }
        Ok(message)
    }

    /// The encoded message as a vector, for tests and one-off writes.
    fn to_vec(&self, version: Version) -> Result<Vec<u8>, EncodeError> {
        let mut buf = Vec::new();
        self.encode(&mut buf, version)?;
        Ok(buf)
    }
}

/// Writes `Length (i) | body`.
pub(crate) fn write_framed<B: BufMut>(buf: &mut B, body: &[u8]) -> Result<(), EncodeError> {
    write_varint(buf, body.len() as u64, "message length")?;
    buf.put_slice(body);
    Ok(())
}
