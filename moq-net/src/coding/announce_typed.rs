//! moq-lite-06-wip's typed announcements: on the announce stream, after ANNOUNCE_OK, each
//! message is `Type (i) | Length (i) | Body` (spec: moq-lite-05, "Version deltas",
//! lite-06-wip; the deployed code, which has neither the draft's Epoch nor its Ended).
//!
//! An announcement's id is implicit: a per-stream counter from 0 that every START on the
//! stream advances, the ones in the initial set included. END and RESTART name it.

use bytes::{Buf, BufMut};

use super::announce::MAX_HOPS;
use super::fields::{read_path, write_path};
use super::message::write_framed;
use super::varint::{read_varint, write_varint};
use super::{DecodeError, EncodeError, Version};
use crate::model::Path;

/// One typed announcement (-06-wip).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypedAnnounce {
    /// Type 0: a broadcast under the prefix became active; it takes the next id.
    Start {
        /// The path relative to the requested prefix.
        suffix: Path,
        /// The origin ids it travelled through, the sender's own left out (it is in
        /// ANNOUNCE_OK).
        hops: Vec<u64>,
        /// What reaching it through the sender costs (the receiver adds its link's cost).
        cost: u64,
    },
    /// Type 1: the announcement with this id ended.
    End {
        /// Its id.
        id: u64,
    },
    /// Type 2: the announcement with this id is reached another way now.
    Restart {
        /// Its id.
        id: u64,
        /// The new route's hops.
        hops: Vec<u64>,
        /// The new route's cost.
        cost: u64,
    },
}

impl TypedAnnounce {
    const START: u64 = 0;
    const END: u64 = 1;
    const RESTART: u64 = 2;

    /// Writes `Type (i) | Length (i) | Body`.
    pub fn encode<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError> {
        if !version.has_typed_announce() {
            return Err(EncodeError::NotInVersion("typed announcements"));
        }
        let mut body = Vec::with_capacity(32);
        let kind = match self {
            Self::Start { suffix, hops, cost } => {
                write_path(&mut body, suffix, "ANNOUNCE_START suffix")?;
                write_hops(&mut body, hops, *cost)?;
                Self::START
            }
            Self::End { id } => {
                write_varint(&mut body, *id, "ANNOUNCE_END id")?;
                Self::END
            }
            Self::Restart { id, hops, cost } => {
                write_varint(&mut body, *id, "ANNOUNCE_RESTART id")?;
                write_hops(&mut body, hops, *cost)?;
                Self::RESTART
            }
        };
        write_varint(buf, kind, "message type")?;
        write_framed(buf, &body)
    }

    /// Reads `Type (i) | Length (i) | Body`; an unknown type is
    /// [`DecodeError::InvalidMessage`].
    pub fn decode<B: Buf>(buf: &mut B, version: Version) -> Result<Self, DecodeError> {
        if !version.has_typed_announce() {
            return Err(DecodeError::NotInVersion("typed announcements"));
        }
        let kind = read_varint(buf)?;
        if kind > Self::RESTART {
            return Err(DecodeError::InvalidMessage(kind));
        }
        let len = read_varint(buf)?;
        if (buf.remaining() as u64) < len {
            return Err(DecodeError::Short);
        }
        let mut body = buf.take(len as usize);
        let message = match kind {
            Self::START => {
                let suffix = read_path(&mut body)?;
                let (hops, cost) = read_hops(&mut body)?;
                Self::Start { suffix, hops, cost }
            }
            Self::END => Self::End {
                id: read_varint(&mut body)?,
            },
            _ => {
                let id = read_varint(&mut body)?;
                let (hops, cost) = read_hops(&mut body)?;
                Self::Restart { id, hops, cost }
            }
        };
        if body.has_remaining() {
            return Err(DecodeError::Long);
        }
        Ok(message)
    }

    /// The encoded message as a vector.
    pub fn to_vec(&self, version: Version) -> Result<Vec<u8>, EncodeError> {
        let mut buf = Vec::new();
        self.encode(&mut buf, version)?;
        Ok(buf)
    }
}

/// `Hop Count (i)`, the hop ids, `Route Cost (i)`.
fn write_hops<B: BufMut>(buf: &mut B, hops: &[u64], cost: u64) -> Result<(), EncodeError> {
    if hops.len() > MAX_HOPS {
        return Err(EncodeError::BoundsExceeded("ANNOUNCE hops"));
    }
    write_varint(buf, hops.len() as u64, "ANNOUNCE hop count")?;
    for hop in hops {
        write_varint(buf, *hop, "ANNOUNCE hop id")?;
    }
    write_varint(buf, cost, "ANNOUNCE route cost")
}

fn read_hops<B: Buf>(buf: &mut B) -> Result<(Vec<u64>, u64), DecodeError> {
    let count = read_varint(buf)?;
    if count > MAX_HOPS as u64 {
        return Err(DecodeError::BoundsExceeded("ANNOUNCE hops"));
    }
    let hops = (0..count)
        .map(|_| read_varint(buf))
        .collect::<Result<_, _>>()?;
    Ok((hops, read_varint(buf)?))
}
