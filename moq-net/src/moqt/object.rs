//! What every object carries besides its payload: its status (§ "Object Status") and its
//! properties (extension headers on 14 and 16), shared by subgroup streams, datagrams and
//! fetch streams.

use bytes::{Buf, BufMut};

use super::Draft;
use super::int::{read_int, write_int};
use super::params::Parameters;
use crate::coding::{DecodeError, EncodeError};

/// The most bytes of properties one object may carry here (the drafts bound them only by
/// the varint; this bounds the memory one object header can ask for).
pub const MAX_PROPERTIES_BYTES: usize = u16::MAX as usize;

/// An object's status. Any status but `Normal` comes with an empty payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ObjectStatus {
    /// A normal object (`0x0`), implicit for a non-empty one.
    #[default]
    Normal,
    /// The object does not exist and never will (`0x1`, 14 only).
    DoesNotExist,
    /// One past the group's last object (`0x3`).
    EndOfGroup,
    /// One past the track's last object (`0x4`).
    EndOfTrack,
}

impl ObjectStatus {
    /// Its value on the wire.
    pub fn value(self) -> u64 {
        match self {
            ObjectStatus::Normal => 0x0,
            ObjectStatus::DoesNotExist => 0x1,
            ObjectStatus::EndOfGroup => 0x3,
            ObjectStatus::EndOfTrack => 0x4,
        }
    }

    /// Reads a status; one `draft` does not define is a PROTOCOL_VIOLATION.
    pub fn decode<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        match read_int(buf, draft)? {
            0x0 => Ok(ObjectStatus::Normal),
            0x1 if draft == Draft::D14 => Ok(ObjectStatus::DoesNotExist),
            0x3 => Ok(ObjectStatus::EndOfGroup),
            0x4 => Ok(ObjectStatus::EndOfTrack),
            _ => Err(DecodeError::InvalidValue("object status")),
        }
    }

    /// Writes it, refusing a status `draft` does not have.
    pub fn encode<B: BufMut>(self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        if self == ObjectStatus::DoesNotExist && draft != Draft::D14 {
            return Err(EncodeError::NotInVersion("Object Does Not Exist"));
        }
        write_int(buf, self.value(), draft, "object status")
    }

    /// Whether an object of this status may carry properties: a normal one on 16 and 18,
    /// any but Object Does Not Exist on 14.
    pub fn allows_properties(self, draft: Draft) -> bool {
        match draft {
            Draft::D14 => self != ObjectStatus::DoesNotExist,
            _ => self == ObjectStatus::Normal,
        }
    }
}

/// Reads `Object Payload Length` and, for an empty object, its `Object Status`; checks that
/// an object of that status may carry `properties`.
pub(crate) fn read_payload_status<B: Buf>(
    buf: &mut B,
    draft: Draft,
    properties: &Parameters,
) -> Result<(u64, ObjectStatus), DecodeError> {
    let payload_len = read_int(buf, draft)?;
    let status = if payload_len == 0 {
        ObjectStatus::decode(buf, draft)?
    } else {
        ObjectStatus::Normal
    };
    if !properties.0.is_empty() && !status.allows_properties(draft) {
        return Err(DecodeError::InvalidValue("properties on a status object"));
    }
    Ok((payload_len, status))
}

/// Reads `Properties Length` and the Key-Value-Pairs within it.
pub(crate) fn read_properties<B: Buf>(
    buf: &mut B,
    draft: Draft,
) -> Result<Parameters, DecodeError> {
    let len = read_int(buf, draft)?;
    if len > MAX_PROPERTIES_BYTES as u64 {
        return Err(DecodeError::BoundsExceeded("object properties"));
    }
    let len = len as usize;
    if buf.remaining() < len {
        return Err(DecodeError::Short);
    }
    let bytes = buf.copy_to_bytes(len);
    Parameters::decode_to_end(&mut &bytes[..], draft)
}

/// Writes `Properties Length` and the pairs.
pub(crate) fn write_properties<B: BufMut>(
    buf: &mut B,
    properties: &Parameters,
    draft: Draft,
) -> Result<(), EncodeError> {
    let mut bytes = Vec::new();
    properties.encode(&mut bytes, draft)?;
    if bytes.len() > MAX_PROPERTIES_BYTES {
        return Err(EncodeError::BoundsExceeded("object properties"));
    }
    write_int(buf, bytes.len() as u64, draft, "properties length")?;
    buf.put_slice(&bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_draft_has_its_statuses() {
        assert_eq!(
            ObjectStatus::decode(&mut &[0x01][..], Draft::D14),
            Ok(ObjectStatus::DoesNotExist)
        );
        assert_eq!(
            ObjectStatus::decode(&mut &[0x01][..], Draft::D16),
            Err(DecodeError::InvalidValue("object status"))
        );
        assert_eq!(
            ObjectStatus::decode(&mut &[0x02][..], Draft::D14),
            Err(DecodeError::InvalidValue("object status"))
        );
        assert!(ObjectStatus::EndOfGroup.allows_properties(Draft::D14));
        assert!(!ObjectStatus::EndOfGroup.allows_properties(Draft::D18));
    }
}
