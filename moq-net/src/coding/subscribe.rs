//! The Subscribe stream (bidi `0x02`): SUBSCRIBE and SUBSCRIBE_UPDATEs from the subscriber;
//! typed replies from the publisher (spec: moq-lite-05, "Messages" and "Version deltas").
//! SUBSCRIBE and SUBSCRIBE_UPDATE are the same on every version; the replies are not:
//!
//! | type | -03 / -04 | -05 / -06-wip |
//! |---|---|---|
//! | 0 | SUBSCRIBE_OK | SUBSCRIBE_START |
//! | 1 | SUBSCRIBE_DROP | SUBSCRIBE_END |
//! | 2 | (none) | SUBSCRIBE_DROP |
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
    /// Type 0 on -03 and -04, SUBSCRIBE_OK: the subscription is accepted, with what the
    /// publisher will deliver. Deployed publishers send exactly one, before any group, and
    /// deployed subscribers wait for it and ignore its fields.
    Ok {
        /// The priority it is served at.
        priority: u8,
        /// Whether groups are delivered in order.
        ordered: bool,
        /// How far a group may fall behind before it is dropped.
        max_latency: Duration,
        /// The first group; `None` for not known yet.
        start: Option<u64>,
        /// The last group, inclusive; `None` for unbounded.
        end: Option<u64>,
    },
    /// Type 0 from -05, SUBSCRIBE_START: the first group that will be delivered.
    Start {
        /// Its sequence.
        group: u64,
    },
    /// Type 1 from -05, SUBSCRIBE_END: the track ended before `group` (exclusive; 0 means it produced
    /// no groups). Trailing groups may still arrive after it.
    End {
        /// One past the last group's sequence.
        group: u64,
    },
    /// Type 2 from -05 (type 1 on -03 and -04), SUBSCRIBE_DROP: groups `start..=end` will
    /// not be delivered.
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
    /// The type of this reply on the wire of `version`.
    fn kind(&self, version: Version) -> Result<u64, EncodeError> {
        let old = !version.has_track_stream();
        Ok(match self {
            Self::Ok { .. } if old => 0,
            Self::Drop { .. } if old => 1,
            Self::Start { .. } if !old => 0,
            Self::End { .. } if !old => 1,
            Self::Drop { .. } => 2,
            Self::Ok { .. } => return Err(EncodeError::NotInVersion("SUBSCRIBE_OK")),
            Self::Start { .. } => return Err(EncodeError::NotInVersion("SUBSCRIBE_START")),
            Self::End { .. } => return Err(EncodeError::NotInVersion("SUBSCRIBE_END")),
        })
    }

    /// Writes `Type (i) | Length (i) | Body`.
    pub fn encode<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError> {
        let kind = self.kind(version)?;
        let mut body = Vec::with_capacity(24);
        match self {
            Self::Ok {
                priority,
                ordered,
                max_latency,
                start,
                end,
            } => {
                body.put_u8(*priority);
                write_ordered(&mut body, *ordered);
                write_millis(&mut body, *max_latency, "SUBSCRIBE_OK max latency")?;
                write_optional_group(&mut body, *start, "SUBSCRIBE_OK start")?;
                write_optional_group(&mut body, *end, "SUBSCRIBE_OK end")?;
            }
            Self::Start { group } => write_varint(&mut body, *group, "SUBSCRIBE_START group")?,
            Self::End { group } => write_varint(&mut body, *group, "SUBSCRIBE_END group")?,
            Self::Drop { start, end, error } => {
                write_varint(&mut body, *start, "SUBSCRIBE_DROP start")?;
                write_varint(&mut body, *end, "SUBSCRIBE_DROP end")?;
                write_varint(&mut body, *error, "SUBSCRIBE_DROP error")?;
            }
        }
        write_varint(buf, kind, "message type")?;
        write_framed(buf, &body)
    }

    /// Reads `Type (i) | Length (i) | Body`; a type the version does not define is
    /// [`DecodeError::InvalidMessage`].
    pub fn decode<B: Buf>(buf: &mut B, version: Version) -> Result<Self, DecodeError> {
        let old = !version.has_track_stream();
        let kind = read_varint(buf)?;
        if kind > if old { 1 } else { 2 } {
            return Err(DecodeError::InvalidMessage(kind));
        }
        let len = read_varint(buf)?;
        if (buf.remaining() as u64) < len {
            return Err(DecodeError::Short);
        }
        let mut body = buf.take(len as usize);
        let response = match (old, kind) {
            (true, 0) => Self::Ok {
                priority: read_u8(&mut body)?,
                ordered: read_ordered(&mut body)?,
                max_latency: read_millis(&mut body)?,
                start: read_optional_group(&mut body)?,
                end: read_optional_group(&mut body)?,
            },
            (false, 0) => Self::Start {
                group: read_varint(&mut body)?,
            },
            (false, 1) => Self::End {
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
