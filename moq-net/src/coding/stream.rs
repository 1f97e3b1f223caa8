//! The varint that opens every stream and says what it carries (spec: moq-lite-05, "Stream
//! types").

use bytes::{Buf, BufMut};

use super::varint::{read_varint, write_varint};
use super::{DecodeError, EncodeError, Version};

/// What a bidirectional stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BidiStream {
    /// 0: lite-01/02 only; any other version treats it as an unexpected stream.
    Session,
    /// 1: ANNOUNCE_REQUEST, then announcements.
    Announce,
    /// 2: SUBSCRIBE and its updates and responses.
    Subscribe,
    /// 3: FETCH of one group.
    Fetch,
    /// 4: PROBE reports (publisher to subscriber).
    Probe,
    /// 5: GOAWAY (either side).
    Goaway,
    /// 6: TRACK, answered by TRACK_INFO.
    Track,
}

/// What a unidirectional stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UniStream {
    /// 0: a GROUP header and its frames (publisher to subscriber).
    Group,
    /// 1: one SETUP (either side).
    Setup,
}

impl BidiStream {
    /// Writes the stream type.
    pub fn encode<B: BufMut>(self, buf: &mut B, _version: Version) -> Result<(), EncodeError> {
        write_varint(buf, self as u64, "stream type")
    }

    /// Reads the stream type; an unknown one is [`DecodeError::InvalidValue`].
    pub fn decode<B: Buf>(buf: &mut B, _version: Version) -> Result<Self, DecodeError> {
        Ok(match read_varint(buf)? {
            0 => Self::Session,
            1 => Self::Announce,
            2 => Self::Subscribe,
            3 => Self::Fetch,
            4 => Self::Probe,
            5 => Self::Goaway,
            6 => Self::Track,
            _ => return Err(DecodeError::InvalidValue("bidi stream type")),
        })
    }
}

impl UniStream {
    /// Writes the stream type.
    pub fn encode<B: BufMut>(self, buf: &mut B, _version: Version) -> Result<(), EncodeError> {
        write_varint(buf, self as u64, "stream type")
    }

    /// Reads the stream type; an unknown one is [`DecodeError::InvalidValue`].
    pub fn decode<B: Buf>(buf: &mut B, _version: Version) -> Result<Self, DecodeError> {
        Ok(match read_varint(buf)? {
            0 => Self::Group,
            1 => Self::Setup,
            _ => return Err(DecodeError::InvalidValue("uni stream type")),
        })
    }
}
