//! The Track stream (bidi `0x06`): TRACK from the subscriber, TRACK_INFO in reply, then FIN
//! (spec: moq-lite-05, "Messages"; a lite-05 subscriber opens it before SUBSCRIBE).

use std::num::NonZeroU64;
use std::time::Duration;

use bytes::{Buf, BufMut};

use super::fields::{
    read_millis, read_ordered, read_path, read_string, read_u8, write_millis, write_ordered,
    write_path, write_string,
};
use super::varint::{read_varint, write_varint};
use super::{DecodeError, EncodeError, Message, Version};
use crate::model::Path;

/// TRACK: ask for a track's properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Track {
    /// The broadcast's path.
    pub broadcast: Path,
    /// The track's name.
    pub track: String,
}

/// TRACK_INFO: a track's properties, the sole reply to TRACK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackInfo {
    /// Publisher priority.
    pub priority: u8,
    /// Whether groups should be delivered in order.
    pub ordered: bool,
    /// How far a group may fall behind before it is dropped.
    pub max_latency: Duration,
    /// Timestamp units per second.
    pub timescale: NonZeroU64,
}

impl Message for Track {
    fn encode_body<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError> {
        if !version.has_track_stream() {
            return Err(EncodeError::NotInVersion("TRACK"));
        }
        write_path(buf, &self.broadcast, "TRACK broadcast")?;
        write_string(buf, &self.track, "TRACK track")
    }

    fn decode_body<B: Buf>(buf: &mut B, version: Version) -> Result<Self, DecodeError> {
        if !version.has_track_stream() {
            return Err(DecodeError::NotInVersion("TRACK"));
        }
        Ok(Self {
            broadcast: read_path(buf)?,
            track: read_string(buf)?,
        })
    }
}

impl Message for TrackInfo {
    fn encode_body<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError> {
        if !version.has_track_stream() {
            return Err(EncodeError::NotInVersion("TRACK_INFO"));
        }
        buf.put_u8(self.priority);
        write_ordered(buf, self.ordered);
        write_millis(buf, self.max_latency, "TRACK_INFO max latency")?;
        write_varint(buf, self.timescale.get(), "TRACK_INFO timescale")
    }

    fn decode_body<B: Buf>(buf: &mut B, version: Version) -> Result<Self, DecodeError> {
        if !version.has_track_stream() {
            return Err(DecodeError::NotInVersion("TRACK_INFO"));
        }
        Ok(Self {
            priority: read_u8(buf)?,
            ordered: read_ordered(buf)?,
            max_latency: read_millis(buf)?,
            timescale: NonZeroU64::new(read_varint(buf)?)
                .ok_or(DecodeError::InvalidValue("TRACK_INFO timescale"))?,
        })
    }
}
