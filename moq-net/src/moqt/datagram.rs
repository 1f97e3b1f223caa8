//! Objects in QUIC datagrams (§ "Object Datagram"): one object each, with its track alias,
//! group and object ids, and a payload (or, for a status datagram, a status) that runs to
//! the end of the datagram.
//!
//! The type's bits: `0x01` properties present, `0x02` the object is its group's last,
//! `0x04` the object id is 0 and left out, `0x08` the priority is left out (16 on), `0x20`
//! a status instead of a payload. On 14 the types are `0x00`–`0x07` and the status types
//! `0x20` and `0x21` (which always carry the object id); from 16, `0x00`–`0x0F` and the
//! status types without the end-of-group bit.

use bytes::{Buf, BufMut, Bytes};

use super::Draft;
use super::filter::read_u8;
use super::int::{read_int, write_int};
use super::object::{ObjectStatus, read_properties, write_properties};
use super::params::Parameters;
use crate::coding::{DecodeError, EncodeError};

/// The type of a padding datagram (18): its bytes after the type are to be dropped.
pub const PADDING_DATAGRAM: u64 = 0x132b_3e29;

/// OBJECT_DATAGRAM (and its status form).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectDatagram {
    /// The track, by the alias its subscription gave it.
    pub track_alias: u64,
    /// The group.
    pub group: u64,
    /// The object.
    pub object: u64,
    /// The publisher priority; `None`: the subscription's (16 on).
    pub priority: Option<u8>,
    /// Its properties (an empty list is sent as none: a datagram that says it has
    /// properties and carries a length of 0 is a PROTOCOL_VIOLATION).
    pub properties: Parameters,
    /// The object is its group's last (a payload datagram only).
    pub end_of_group: bool,
    /// A status datagram's status; `None`: a payload datagram.
    pub status: Option<ObjectStatus>,
    /// The payload (empty for a status datagram).
    pub payload: Bytes,
}

impl ObjectDatagram {
    /// Whether `kind` is an object datagram's type on `draft`.
    pub fn is_datagram_type(kind: u64, draft: Draft) -> bool {
        match draft {
            Draft::D14 => kind <= 0x07 || kind == 0x20 || kind == 0x21,
            // Status with end of group (0x02) is not a type.
            _ => kind <= 0x0f || ((0x20..=0x2f).contains(&kind) && kind & 0x02 == 0),
        }
    }

    /// Writes the datagram.
    pub fn encode<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        let mut kind = 0u64;
        if !self.properties.0.is_empty() {
            kind |= 0x01;
        }
        if self.end_of_group {
            kind |= 0x02;
        }
        let status_with_object_id = self.status.is_some() && draft == Draft::D14;
        if self.object == 0 && !status_with_object_id {
            kind |= 0x04;
        }
        if self.priority.is_none() {
            if !draft.has_default_priority() {
                return Err(EncodeError::NotInVersion("a datagram without a priority"));
            }
            kind |= 0x08;
        }
        if let Some(status) = self.status {
            if self.end_of_group || !self.payload.is_empty() {
                return Err(EncodeError::InvalidValue("a status datagram"));
            }
            if !self.properties.0.is_empty() && !status.allows_properties(draft) {
                return Err(EncodeError::InvalidValue("properties on a status object"));
            }
            kind |= 0x20;
        }
        write_int(buf, kind, draft, "datagram type")?;
        write_int(buf, self.track_alias, draft, "track alias")?;
        write_int(buf, self.group, draft, "group id")?;
        if kind & 0x04 == 0 {
            write_int(buf, self.object, draft, "object id")?;
        }
        if let Some(priority) = self.priority {
            buf.put_u8(priority);
        }
        if kind & 0x01 != 0 {
            write_properties(buf, &self.properties, draft)?;
        }
        match self.status {
            Some(status) => status.encode(buf, draft),
            None => {
                buf.put_slice(&self.payload);
                Ok(())
            }
        }
    }

    /// Reads a whole datagram.
    pub fn decode<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let kind = read_int(buf, draft)?;
        if !Self::is_datagram_type(kind, draft) {
            return Err(DecodeError::InvalidMessage(kind));
        }
        let status_datagram = kind & 0x20 != 0;
        let track_alias = read_int(buf, draft)?;
        let group = read_int(buf, draft)?;
        let object = if kind & 0x04 == 0 {
            read_int(buf, draft)?
        } else {
            0
        };
        let priority = if kind & 0x08 == 0 {
            Some(read_u8(buf)?)
        } else {
            None
        };
        let properties = if kind & 0x01 != 0 {
            let properties = read_properties(buf, draft)?;
            if properties.0.is_empty() {
                return Err(DecodeError::InvalidValue("empty datagram properties"));
            }
            properties
        } else {
            Parameters::default()
        };
        let (status, payload) = if status_datagram {
            let status = ObjectStatus::decode(buf, draft)?;
            if !properties.0.is_empty() && !status.allows_properties(draft) {
                return Err(DecodeError::InvalidValue("properties on a status object"));
            }
            if buf.has_remaining() {
                return Err(DecodeError::Long);
            }
            (Some(status), Bytes::new())
        } else {
            (None, buf.copy_to_bytes(buf.remaining()))
        };
        Ok(Self {
            track_alias,
            group,
            object,
            priority,
            properties,
            end_of_group: kind & 0x02 != 0,
            status,
            payload,
        })
    }
}
