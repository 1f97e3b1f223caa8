//! The Announce stream (bidi `0x01`): ANNOUNCE_REQUEST from the subscriber, then
//! ANNOUNCE_OK and ANNOUNCEs from the publisher (spec: moq-lite-05, "Messages").

use bytes::{Buf, BufMut};

use super::fields::{read_path, read_u8, write_path};
use super::varint::{read_varint, write_varint};
use super::{DecodeError, EncodeError, Message, Version};
use crate::model::Path;

/// An announce carries at most this many hop ids.
pub const MAX_HOPS: usize = 32;

/// ANNOUNCE_REQUEST: follow the broadcasts under a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnounceRequest {
    /// The prefix to follow.
    pub prefix: Path,
    /// The requester's own origin id, so the publisher can leave out routes through it
    /// (0 for none; lite-04 and lite-05 only).
    pub exclude_hop: u64,
}

/// ANNOUNCE_OK: the publisher's first reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnounceOk {
    /// The publisher's origin id: the receiver appends it to every announce's hop chain.
    pub hop_id: u64,
    /// How many ANNOUNCEs follow at once as the initial set.
    pub active_count: u64,
}

/// ANNOUNCE: a broadcast under the prefix became active or ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announce {
    /// Active or ended.
    pub status: AnnounceStatus,
    /// The path relative to the requested prefix.
    pub suffix: Path,
    /// The origin ids the announce travelled through, the publisher's own left out. An
    /// ended announce is sent with none.
    pub hops: Vec<u64>,
}

/// The status byte of an ANNOUNCE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AnnounceStatus {
    /// 0: the broadcast ended.
    Ended,
    /// 1: the broadcast is active. A second active for an active path is a restart; status
    /// 2 ("restart") is decoded as active but never sent.
    Active,
}

impl Message for AnnounceRequest {
    fn encode_body<B: BufMut>(&self, buf: &mut B, _version: Version) -> Result<(), EncodeError> {
        write_path(buf, &self.prefix, "ANNOUNCE_REQUEST prefix")?;
        write_varint(buf, self.exclude_hop, "ANNOUNCE_REQUEST exclude hop")
    }

    fn decode_body<B: Buf>(buf: &mut B, _version: Version) -> Result<Self, DecodeError> {
        Ok(Self {
            prefix: read_path(buf)?,
            exclude_hop: read_varint(buf)?,
        })
    }
}

impl Message for AnnounceOk {
    fn encode_body<B: BufMut>(&self, buf: &mut B, _version: Version) -> Result<(), EncodeError> {
        write_varint(buf, self.hop_id, "ANNOUNCE_OK hop id")?;
        write_varint(buf, self.active_count, "ANNOUNCE_OK active count")
    }

    fn decode_body<B: Buf>(buf: &mut B, _version: Version) -> Result<Self, DecodeError> {
        Ok(Self {
            hop_id: read_varint(buf)?,
            active_count: read_varint(buf)?,
        })
    }
}

impl Message for Announce {
    fn encode_body<B: BufMut>(&self, buf: &mut B, _version: Version) -> Result<(), EncodeError> {
        if self.hops.len() > MAX_HOPS {
            return Err(EncodeError::BoundsExceeded("ANNOUNCE hops"));
        }
        buf.put_u8(match self.status {
            AnnounceStatus::Ended => 0,
            AnnounceStatus::Active => 1,
        });
        write_path(buf, &self.suffix, "ANNOUNCE suffix")?;
        write_varint(buf, self.hops.len() as u64, "ANNOUNCE hop count")?;
        for hop in &self.hops {
            write_varint(buf, *hop, "ANNOUNCE hop id")?;
        }
        Ok(())
    }

    fn decode_body<B: Buf>(buf: &mut B, _version: Version) -> Result<Self, DecodeError> {
        let status = match read_u8(buf)? {
            0 => AnnounceStatus::Ended,
            1 | 2 => AnnounceStatus::Active,
            _ => return Err(DecodeError::InvalidValue("ANNOUNCE status")),
        };
        let suffix = read_path(buf)?;
        let count = read_varint(buf)?;
        if count > MAX_HOPS as u64 {
            return Err(DecodeError::BoundsExceeded("ANNOUNCE hops"));
        }
        let hops = (0..count)
            .map(|_| read_varint(buf))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            status,
            suffix,
            hops,
        })
    }
}
