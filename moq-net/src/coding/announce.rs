//! The Announce stream (bidi `0x01`): ANNOUNCE_REQUEST from the subscriber, then
//! ANNOUNCE_OK and ANNOUNCEs from the publisher (spec: moq-lite-05, "Messages").
//!
//! Per version (spec: "Version deltas"):
//!
//! | | -03 | -04 | -05 | -06-wip |
//! |---|---|---|---|---|
//! | ANNOUNCE_REQUEST | prefix | prefix, Exclude Hop | prefix, Exclude Hop | prefix |
//! | ANNOUNCE_OK | none | none | hop id, active count | hop id, active count |
//! | announcements | ANNOUNCE, hop *count* | ANNOUNCE, hop ids | ANNOUNCE, hop ids | typed ([`TypedAnnounce`](super::TypedAnnounce)) |
//! | the sender's own id | counted | appended | in ANNOUNCE_OK | in ANNOUNCE_OK |
//!
//! Which hops a sender puts in is the session's business; the codec carries what it is
//! given. On -03 only the count travels: the receiver gets that many unknown (0) hops.

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
    /// (0 for none). Only -04 and -05 carry it: elsewhere it is not written, and reads as 0.
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
    /// The origin ids the announce travelled through (from -05 the sender's own left out,
    /// before it appended). An ended announce is sent with none. On -03 only their number
    /// travels, and is read back as that many unknown (0) ids.
    pub hops: Vec<u64>,
}

/// The status byte of an ANNOUNCE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AnnounceStatus {
    /// 0: the broadcast ended.
    Ended,
    /// 1: the broadcast is active. On -05 a second active for an active path is a restart,
    /// and status 2 ("restart") is decoded as active but never sent; -03 and -04 refuse 2.
    Active,
}

impl Message for AnnounceRequest {
    fn encode_body<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError> {
        write_path(buf, &self.prefix, "ANNOUNCE_REQUEST prefix")?;
        if version.has_exclude_hop() {
            write_varint(buf, self.exclude_hop, "ANNOUNCE_REQUEST exclude hop")?;
        }
        Ok(())
    }

    fn decode_body<B: Buf>(buf: &mut B, version: Version) -> Result<Self, DecodeError> {
        Ok(Self {
            prefix: read_path(buf)?,
            exclude_hop: match version.has_exclude_hop() {
                true => read_varint(buf)?,
                false => 0,
            },
        })
    }
}

impl Message for AnnounceOk {
    fn encode_body<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError> {
        if !version.has_announce_ok() {
            return Err(EncodeError::NotInVersion("ANNOUNCE_OK"));
        }
        write_varint(buf, self.hop_id, "ANNOUNCE_OK hop id")?;
        write_varint(buf, self.active_count, "ANNOUNCE_OK active count")
    }

    fn decode_body<B: Buf>(buf: &mut B, version: Version) -> Result<Self, DecodeError> {
        if !version.has_announce_ok() {
            return Err(DecodeError::NotInVersion("ANNOUNCE_OK"));
        }
        Ok(Self {
            hop_id: read_varint(buf)?,
            active_count: read_varint(buf)?,
        })
    }
}

impl Message for Announce {
    fn encode_body<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError> {
        if version.has_typed_announce() {
            return Err(EncodeError::NotInVersion("ANNOUNCE (untyped)"));
        }
        if self.hops.len() > MAX_HOPS {
            return Err(EncodeError::BoundsExceeded("ANNOUNCE hops"));
        }
        buf.put_u8(match self.status {
            AnnounceStatus::Ended => 0,
            AnnounceStatus::Active => 1,
        });
        write_path(buf, &self.suffix, "ANNOUNCE suffix")?;
        write_varint(buf, self.hops.len() as u64, "ANNOUNCE hop count")?;
        if version.has_hop_ids() {
            for hop in &self.hops {
                write_varint(buf, *hop, "ANNOUNCE hop id")?;
            }
        }
        Ok(())
    }

    fn decode_body<B: Buf>(buf: &mut B, version: Version) -> Result<Self, DecodeError> {
        if version.has_typed_announce() {
            return Err(DecodeError::NotInVersion("ANNOUNCE (untyped)"));
        }
        let status = match read_u8(buf)? {
            0 => AnnounceStatus::Ended,
            1 => AnnounceStatus::Active,
            2 if version.has_restart_by_duplicate() => AnnounceStatus::Active,
            _ => return Err(DecodeError::InvalidValue("ANNOUNCE status")),
        };
        let suffix = read_path(buf)?;
        let count = read_varint(buf)?;
        if count > MAX_HOPS as u64 {
            return Err(DecodeError::BoundsExceeded("ANNOUNCE hops"));
        }
        let hops = match version.has_hop_ids() {
            true => (0..count)
                .map(|_| read_varint(buf))
                .collect::<Result<_, _>>()?,
            // -03: the count alone; every hop is unknown.
            false => vec![0; count as usize],
        };
        Ok(Self {
            status,
            suffix,
            hops,
        })
    }
}
