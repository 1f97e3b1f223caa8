//! The Fetch stream (bidi `0x03`): FETCH, answered by the group's bare FRAMEs, then FIN
//! (spec: moq-lite-05, "Messages").

use bytes::{Buf, BufMut};

use super::fields::{read_path, read_string, read_u8, write_path, write_string};
use super::varint::{read_varint, write_varint};
use super::{DecodeError, EncodeError, Message, Version};
use crate::model::Path;

/// FETCH: one cached group of a track, by sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    /// The broadcast's path.
    pub broadcast: Path,
    /// The track's name.
    pub track: String,
    /// Subscriber priority.
    pub priority: u8,
    /// The group's sequence.
    pub group: u64,
}

impl Message for Fetch {
    fn encode_body<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError> {
        if !version.has_track_stream() {
            return Err(EncodeError::NotInVersion("FETCH"));
        }
        write_path(buf, &self.broadcast, "FETCH broadcast")?;
        write_string(buf, &self.track, "FETCH track")?;
        buf.put_u8(self.priority);
        write_varint(buf, self.group, "FETCH group")
    }

    fn decode_body<B: Buf>(buf: &mut B, version: Version) -> Result<Self, DecodeError> {
        if !version.has_track_stream() {
            return Err(DecodeError::NotInVersion("FETCH"));
        }
        Ok(Self {
            broadcast: read_path(buf)?,
            track: read_string(buf)?,
            priority: read_u8(buf)?,
            group: read_varint(buf)?,
        })
    }
}
