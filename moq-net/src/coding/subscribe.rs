//! The Subscribe stream (bidi `0x02`): SUBSCRIBE and SUBSCRIBE_UPDATEs from the subscriber;
//! typed SUBSCRIBE_START / SUBSCRIBE_END / SUBSCRIBE_DROP from the publisher (spec:
//! moq-lite-05, "Messages").
//!
//! Groups in SUBSCRIBE and SUBSCRIBE_UPDATE are optional (0 on the wire is none, `g + 1` is
//! group `g`) and the end is inclusive; SUBSCRIBE_START, SUBSCRIBE_END and SUBSCRIBE_DROP
//! carry plain sequences, and SUBSCRIBE_END's is exclusive.

use std::time::Duration;

use bytes::{Buf, BufMut};

use super::fields::{
    read_millis, read_optional_group, read_ordered, read_path, read_string, read_u8, write_millis,
    write_optional_group, write_ordered, write_path, write_string,
};
use super::message::write_framed;
use super::varint::{read_varint, write_varint};
use super::{DecodeError, EncodeError, Message, Version};
use crate::model::Path;

/// SUBSCRIBE: deliver a track's groups on uni streams tagged with `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    /// Unique per session, counting up from 0; tags the GROUP streams.
    pub id: u64,
    /// The broadcast's path.
    pub broadcast: Path,
    /// The track's name.
    pub track: String,
    /// Subscriber priority: a higher value is delivered first.
    pub priority: u8,
    /// Whether groups should be delivered in order.
    pub ordered: bool,
    /// How far a group may fall behind before it is dropped.
    pub max_latency: Duration,
    /// The first group; `None` starts at the latest.
    pub start: Option<u64>,
    /// The last group, inclusive; `None` is unbounded.
    pub end: Option<u64>,
}

/// SUBSCRIBE_UPDATE: change a live subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscribeUpdate {
    /// Subscriber priority.
    pub priority: u8,
    /// Whether groups should be delivered in order.
    pub ordered: bool,
    /// How far a group may fall behind before it is dropped.
    pub max_latency: Duration,
    /// The first group; `None` is the latest.
    pub start: Option<u64>,
    /// The last group, inclusive; `None` is unbounded.
    pub end: Option<u64>,
}

/// The publisher's typed replies on the subscribe stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubscribeResponse {
    /// Type 0, SUBSCRIBE_START: the first group that will be delivered.
    Start {
        /// Its sequence.
        group: u64,
    },
    /// Type 1, SUBSCRIBE_END: the track ended before `group` (exclusive; 0 means it produced
    /// no groups). Trailing groups may still arrive after it.
    End {
        /// One past the last group's sequence.
        group: u64,
    },
    /// Type 2, SUBSCRIBE_DROP: groups `start..=end` will not be delivered.
    Drop {
        /// The first dropped group.
        start: u64,
        /// The last dropped group, inclusive.
        end: u64,
        /// Why, as a wire error code.
        error: u64,
    },
}

impl Message for Subscribe {
    fn encode_body<B: BufMut>(&self, buf: &mut B, _version: Version) -> Result<(), EncodeError> {
        write_varint(buf, self.id, "SUBSCRIBE id")?;
        write_path(buf, &self.broadcast, "SUBSCRIBE broadcast")?;
        write_string(buf, &self.track, "SUBSCRIBE track")?;
        buf.put_u8(self.priority);
        write_ordered(buf, self.ordered);
        write_millis(buf, self.max_latency, "SUBSCRIBE max latency")?;
        write_optional_group(buf, self.start, "SUBSCRIBE start")?;
        write_optional_group(buf, self.end, "SUBSCRIBE end")
    }

    fn decode_body<B: Buf>(buf: &mut B, _version: Version) -> Result<Self, DecodeError> {
        Ok(Self {
            id: read_varint(buf)?,
            broadcast: read_path(buf)?,
            track: read_string(buf)?,
            priority: read_u8(buf)?,
            ordered: read_ordered(buf)?,
            max_latency: read_millis(buf)?,
            start: read_optional_group(buf)?,
            end: read_optional_group(buf)?,
        })
    }
}

impl Message for SubscribeUpdate {
    fn encode_body<B: BufMut>(&self, buf: &mut B, _version: Version) -> Result<(), EncodeError> {
        buf.put_u8(self.priority);
        write_ordered(buf, self.ordered);
        write_millis(buf, self.max_latency, "SUBSCRIBE_UPDATE max latency")?;
        write_optional_group(buf, self.start, "SUBSCRIBE_UPDATE start")?;
        write_optional_group(buf, self.end, "SUBSCRIBE_UPDATE end")
    }

    fn decode_body<B: Buf>(buf: &mut B, _version: Version) -> Result<Self, DecodeError> {
        Ok(Self {
            priority: read_u8(buf)?,
            ordered: read_ordered(buf)?,
            max_latency: read_millis(buf)?,
            start: read_optional_group(buf)?,
            end: read_optional_group(buf)?,
        })
    }
}

impl SubscribeResponse {
    const START: u64 = 0;
    const END: u64 = 1;
    const DROP: u64 = 2;

    /// Writes `Type (i) | Length (i) | Body`.
    pub fn encode<B: BufMut>(&self, buf: &mut B, _version: Version) -> Result<(), EncodeError> {
        let mut body = Vec::with_capacity(24);
        let kind = match self {
            Self::Start { group } => {
                write_varint(&mut body, *group, "SUBSCRIBE_START group")?;
                Self::START
            }
            Self::End { group } => {
                write_varint(&mut body, *group, "SUBSCRIBE_END group")?;
                Self::END
            }
            Self::Drop { start, end, error } => {
                write_varint(&mut body, *start, "SUBSCRIBE_DROP start")?;
                write_varint(&mut body, *end, "SUBSCRIBE_DROP end")?;
                write_varint(&mut body, *error, "SUBSCRIBE_DROP error")?;
                Self::DROP
            }
        };
        write_varint(buf, kind, "message type")?;
        write_framed(buf, &body)
    }

    /// Reads `Type (i) | Length (i) | Body`; an unknown type is
    /// [`DecodeError::InvalidMessage`].
    pub fn decode<B: Buf>(buf: &mut B, _version: Version) -> Result<Self, DecodeError> {
        let kind = read_varint(buf)?;
        if kind > Self::DROP {
            return Err(DecodeError::InvalidMessage(kind));
        }
        let len = read_varint(buf)?;
        if (buf.remaining() as u64) < len {
            return Err(DecodeError::Short);
        }
        let mut body = buf.take(len as usize);
        let response = match kind {
            Self::START => Self::Start {
                group: read_varint(&mut body)?,
            },
            Self::END => Self::End {
                group: read_varint(&mut body)?,
            },
            _ => Self::Drop {
                start: read_varint(&mut body)?,
                end: read_varint(&mut body)?,
                error: read_varint(&mut body)?,
            },
        };
        if body.has_remaining() {
            return Err(DecodeError::Long);
        }
        Ok(response)
    }

    /// The encoded response as a vector.
    pub fn to_vec(&self, version: Version) -> Result<Vec<u8>, EncodeError> {
        let mut buf = Vec::new();
        self.encode(&mut buf, version)?;
        Ok(buf)
    }
}
