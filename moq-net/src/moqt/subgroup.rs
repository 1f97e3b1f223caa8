//! Subgroup streams (§ "Subgroup Header"): a unidirectional stream that opens with
//! SUBGROUP_HEADER and carries one subgroup's objects in order.
//!
//! The header's type says which fields follow: bit `0x01` every object has properties,
//! bits `0x06` how the subgroup id is given (0: it is 0; 1: it is the first object's id;
//! 2: a field; 3: reserved), `0x08` the subgroup holds the group's last object, `0x10` is
//! always set, `0x20` the priority field is left out (16 on; 14 always has it), `0x40` the
//! first object is the subgroup's first (18).

use bytes::{Buf, BufMut};

use super::Draft;
use super::filter::read_u8;
use super::int::{max_int, read_int, write_int};
use super::object::{ObjectStatus, read_payload_status, read_properties, write_properties};
use super::params::Parameters;
use crate::coding::{DecodeError, EncodeError};

/// The type of a padding stream (18): its bytes after the type are to be dropped.
pub const PADDING_STREAM: u64 = 0x132b_3e28;

/// How a SUBGROUP_HEADER gives its subgroup id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubgroupId {
    /// Subgroup 0, no field.
    Zero,
    /// The id of the stream's first object, no field.
    FirstObject,
    /// This id, in a field.
    Explicit(u64),
}

/// SUBGROUP_HEADER.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubgroupHeader {
    /// The track, by the alias its subscription gave it.
    pub track_alias: u64,
    /// The group.
    pub group: u64,
    /// The subgroup.
    pub subgroup: SubgroupId,
    /// The publisher priority; `None`: the subscription's (16 on).
    pub priority: Option<u8>,
    /// Every object on the stream has properties (possibly none: a length of 0).
    pub properties: bool,
    /// The stream holds the group's last object: at FIN, nothing after its last object
    /// exists in the group.
    pub end_of_group: bool,
    /// The stream's first object is the subgroup's first (18).
    pub first_object: bool,
}

impl SubgroupHeader {
    /// Whether `kind` opens a subgroup stream on `draft` (invalid types included: those are
    /// a PROTOCOL_VIOLATION, which [`decode`](Self::decode) reports).
    pub fn is_subgroup_type(kind: u64, draft: Draft) -> bool {
        kind & 0x10 != 0 && kind < 0x80 && (kind & !Self::allowed_bits(draft)) == 0
    }

    fn allowed_bits(draft: Draft) -> u64 {
        match draft {
            Draft::D14 => 0x1f,
            Draft::D16 => 0x3f,
            Draft::D18 => 0x7f,
        }
    }

    /// The stream type this header is sent with.
    pub fn stream_type(&self, draft: Draft) -> Result<u64, EncodeError> {
        let mode = match self.subgroup {
            SubgroupId::Zero => 0,
            SubgroupId::FirstObject => 1,
            SubgroupId::Explicit(_) => 2,
        };
        let mut kind = 0x10 | mode << 1;
        kind |= u64::from(self.properties);
        kind |= u64::from(self.end_of_group) << 3;
        if self.priority.is_none() {
            if !draft.has_default_priority() {
                return Err(EncodeError::NotInVersion("a subgroup without a priority"));
            }
            kind |= 0x20;
        }
        if self.first_object {
            if !draft.has_first_object_bit() {
                return Err(EncodeError::NotInVersion("FIRST_OBJECT"));
            }
            kind |= 0x40;
        }
        Ok(kind)
    }

    /// Writes the stream type and the header.
    pub fn encode<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.stream_type(draft)?, draft, "stream type")?;
        write_int(buf, self.track_alias, draft, "track alias")?;
        write_int(buf, self.group, draft, "group id")?;
        if let SubgroupId::Explicit(id) = self.subgroup {
            write_int(buf, id, draft, "subgroup id")?;
        }
        if let Some(priority) = self.priority {
            buf.put_u8(priority);
        }
        Ok(())
    }

    /// Reads the stream type and the header. A type that is not a subgroup's on `draft`, or
    /// whose subgroup id mode is reserved, is a PROTOCOL_VIOLATION.
    pub fn decode<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let kind = read_int(buf, draft)?;
        if !Self::is_subgroup_type(kind, draft) {
            return Err(DecodeError::InvalidMessage(kind));
        }
        let track_alias = read_int(buf, draft)?;
        let group = read_int(buf, draft)?;
        let subgroup = match (kind & 0x06) >> 1 {
            0 => SubgroupId::Zero,
            1 => SubgroupId::FirstObject,
            2 => SubgroupId::Explicit(read_int(buf, draft)?),
            _ => return Err(DecodeError::InvalidValue("subgroup id mode")),
        };
        let priority = if kind & 0x20 == 0 {
            Some(read_u8(buf)?)
        } else {
            None
        };
        Ok(Self {
            track_alias,
            group,
            subgroup,
            priority,
            properties: kind & 0x01 != 0,
            end_of_group: kind & 0x08 != 0,
            first_object: kind & 0x40 != 0,
        })
    }
}

/// One object's header on a subgroup stream; `payload_len` bytes of payload follow it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubgroupObject {
    /// The object id.
    pub id: u64,
    /// Its properties (only on a stream whose header says objects have them).
    pub properties: Parameters,
    /// The payload's length; 0 comes with a status.
    pub payload_len: u64,
    /// Its status: `Normal` for any object with a payload.
    pub status: ObjectStatus,
}

/// Reads and writes the objects of one subgroup stream: each object's id is a delta from
/// the previous one's (the first's is its id), which this keeps.
#[derive(Debug, Clone)]
pub struct SubgroupObjects {
    draft: Draft,
    properties: bool,
    previous: Option<u64>,
}

impl SubgroupObjects {
    /// The objects of a stream opened with `header`.
    pub fn new(header: &SubgroupHeader, draft: Draft) -> Self {
        Self {
            draft,
            properties: header.properties,
            previous: None,
        }
    }

    /// Reads the next object's header. Consumes from `buf` even when it fails; on
    /// [`DecodeError::Short`] decode again from the same bytes once more arrived (the id
    /// sequence moves on only on success).
    pub fn decode<B: Buf>(&mut self, buf: &mut B) -> Result<SubgroupObject, DecodeError> {
        let draft = self.draft;
        let delta = read_int(buf, draft)?;
        let id = match self.previous {
            None => delta,
            Some(previous) => previous
                .checked_add(delta)
                .and_then(|id| id.checked_add(1))
                .filter(|id| *id <= max_int(draft))
                .ok_or(DecodeError::InvalidValue("object id"))?,
        };
        let properties = if self.properties {
            read_properties(buf, draft)?
        } else {
            Parameters::default()
        };
        let (payload_len, status) = read_payload_status(buf, draft, &properties)?;
        self.previous = Some(id);
        Ok(SubgroupObject {
            id,
            properties,
            payload_len,
            status,
        })
    }

    /// Writes the next object's header; its id must be above the previous one's.
    pub fn encode<B: BufMut>(
        &mut self,
        object: &SubgroupObject,
        buf: &mut B,
    ) -> Result<(), EncodeError> {
        let draft = self.draft;
        let delta = match self.previous {
            None => object.id,
            Some(previous) if object.id > previous => object.id - previous - 1,
            Some(_) => return Err(EncodeError::InvalidValue("object id")),
        };
        if object.payload_len > 0 && object.status != ObjectStatus::Normal {
            return Err(EncodeError::InvalidValue("a status object with a payload"));
        }
        if !object.properties.0.is_empty()
            && (!self.properties || !object.status.allows_properties(draft))
        {
            return Err(EncodeError::InvalidValue("object properties"));
        }
        write_int(buf, delta, draft, "object id delta")?;
        if self.properties {
            write_properties(buf, &object.properties, draft)?;
        }
        write_int(buf, object.payload_len, draft, "payload length")?;
        if object.payload_len == 0 {
            object.status.encode(buf, draft)?;
        }
        self.previous = Some(object.id);
        Ok(())
    }
}
