//! Control message framing, every draft: `Message Type`, `Message Length (16)`, then the
//! payload of exactly that length (§ "Control Messages"). A length that does not match the
//! payload is a PROTOCOL_VIOLATION; an unknown type closes the session.

use bytes::{Buf, BufMut, Bytes};

use super::Draft;
use super::int::{read_int, write_int};
use crate::coding::{DecodeError, EncodeError};

/// The longest payload a control message carries (its 16-bit length).
pub const MAX_PAYLOAD_BYTES: usize = u16::MAX as usize;

/// A control message's type and payload, read off a stream before the session knows what
/// the type is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The message type.
    pub kind: u64,
    /// The payload, exactly `Message Length` bytes.
    pub payload: Bytes,
}

impl Frame {
    /// Reads one framed message: [`DecodeError::Short`] until the whole payload is there.
    pub fn decode<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let kind = read_int(buf, draft)?;
        if buf.remaining() < 2 {
            return Err(DecodeError::Short);
        }
        let len = usize::from(buf.get_u16());
        if buf.remaining() < len {
            return Err(DecodeError::Short);
        }
        Ok(Self {
            kind,
            payload: buf.copy_to_bytes(len),
        })
    }
}

/// A control message of some draft: implementors write and read the payload; the framing
/// is shared.
pub trait Control: Sized {
    /// Its name in the drafts, for errors and logs.
    const NAME: &'static str;

    /// Its message type on `draft`, or `None` where that draft has no such message.
    fn message_type(draft: Draft) -> Option<u64>;

    /// Writes the payload.
    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError>;

    /// Reads the payload from exactly its bytes.
    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError>;

    /// Writes `Type | Length (16) | payload`; a payload over 2^16 − 1 bytes is refused.
    fn encode<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        let kind = Self::message_type(draft).ok_or(EncodeError::NotInVersion(Self::NAME))?;
        let mut payload = Vec::with_capacity(64);
        self.encode_payload(&mut payload, draft)?;
        if payload.len() > MAX_PAYLOAD_BYTES {
            return Err(EncodeError::BoundsExceeded(Self::NAME));
        }
        write_int(buf, kind, draft, "message type")?;
        buf.put_u16(payload.len() as u16);
        buf.put_slice(&payload);
        Ok(())
    }

    /// Reads the message from a [`Frame`] of its type: fields that end before the length
    /// does are [`DecodeError::Long`], fields that run past it [`DecodeError::Short`] (both
    /// a PROTOCOL_VIOLATION on a frame that is all there).
    fn from_frame(frame: &Frame, draft: Draft) -> Result<Self, DecodeError> {
        if Self::message_type(draft) != Some(frame.kind) {
            return Err(DecodeError::InvalidMessage(frame.kind));
        }
        let mut payload = &frame.payload[..];
        let message = Self::decode_payload(&mut payload, draft)?;
        if payload.has_remaining() {
            return Err(DecodeError::Long);
        }
        Ok(message)
    }

    /// Reads a framed message of this type.
    fn decode<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Self::from_frame(&Frame::decode(buf, draft)?, draft)
    }

    /// The framed message as a vector, for tests and one-off writes.
    fn to_vec(&self, draft: Draft) -> Result<Vec<u8>, EncodeError> {
        let mut buf = Vec::new();
        self.encode(&mut buf, draft)?;
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_waits_for_its_whole_payload() {
        let bytes = [0x10, 0x00, 0x03, b'a', b'b', b'c', 0xff];
        for cut in 0..6 {
            assert_eq!(
                Frame::decode(&mut &bytes[..cut], Draft::D16),
                Err(DecodeError::Short)
            );
        }
        let mut buf = &bytes[..];
        let frame = Frame::decode(&mut buf, Draft::D16).unwrap();
        assert_eq!(frame.kind, 0x10);
        assert_eq!(&frame.payload[..], b"abc");
        assert_eq!(buf, [0xff], "the next message's bytes stay");
    }

    #[test]
    fn draft_18_frames_types_as_vi64() {
        // SETUP's type 0x2F00 is two vi64 bytes (prefix 10, 14 bits); a longer form of the
        // same value is valid too.
        for bytes in [
            &[0xaf, 0x00, 0x00, 0x00][..],
            &[0xc0, 0x2f, 0x00, 0x00, 0x00],
        ] {
            let frame = Frame::decode(&mut &bytes[..], Draft::D18).unwrap();
            assert_eq!(frame.kind, 0x2f00);
            assert!(frame.payload.is_empty());
        }
    }
}
