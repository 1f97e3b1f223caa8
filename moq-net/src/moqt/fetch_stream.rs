//! FETCH's data stream (§ "Fetch Header"): a unidirectional stream that opens with
//! FETCH_HEADER and carries the fetched objects, each with its own location.
//!
//! On 14 every object spells out its group, subgroup, object id and priority. From 16 a
//! `Serialization Flags` integer says which of them differ from the prior object's (and
//! values of 128 and up mark the end of a range of objects that do not exist, or whose
//! state is unknown); on 18 group and object ids are deltas, whose direction follows the
//! FETCH's group order.

use bytes::{Buf, BufMut};

use super::Draft;
use super::fields::Location;
use super::filter::{GroupOrder, read_u8};
use super::int::{max_int, read_int, write_int};
use super::object::{ObjectStatus, read_payload_status, read_properties, write_properties};
use super::params::Parameters;
use crate::coding::{DecodeError, EncodeError};

/// The stream type of FETCH_HEADER (every draft).
pub const FETCH_HEADER: u64 = 0x05;

/// `Serialization Flags` of an End of Non-Existent Range (16 on).
const END_OF_NON_EXISTENT_RANGE: u64 = 0x8c;
/// `Serialization Flags` of an End of Unknown Range (16 on).
const END_OF_UNKNOWN_RANGE: u64 = 0x10c;

/// FETCH_HEADER: the FETCH whose objects the stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchHeader {
    /// The FETCH's request id.
    pub request_id: u64,
}

impl FetchHeader {
    /// Writes the stream type and the header.
    pub fn encode<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, FETCH_HEADER, draft, "stream type")?;
        write_int(buf, self.request_id, draft, "request id")
    }

    /// Reads the stream type and the header.
    pub fn decode<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        match read_int(buf, draft)? {
            FETCH_HEADER => Ok(Self {
                request_id: read_int(buf, draft)?,
            }),
            kind => Err(DecodeError::InvalidMessage(kind)),
        }
    }
}

/// One fetched object's header; `payload_len` bytes of payload follow it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchObject {
    /// Where it is.
    pub location: Location,
    /// Its subgroup; `None` for an object that was sent as a datagram (16 on; 14 gives
    /// such an object its object id as subgroup).
    pub subgroup: Option<u64>,
    /// Its publisher priority.
    pub priority: u8,
    /// Its properties.
    pub properties: Parameters,
    /// The payload's length.
    pub payload_len: u64,
    /// Its status (14: an empty object carries one; later drafts send none on a fetch
    /// stream, so it is `Normal`).
    pub status: ObjectStatus,
}

/// What follows FETCH_HEADER, one after another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchItem {
    /// An object.
    Object(FetchObject),
    /// Every location after the prior item up to and including `end` holds no object
    /// (`missing`: they do not exist; otherwise their state is unknown) (16 on). On 18 the
    /// marker always carries a group delta, so after a first item its group is never the
    /// prior item's (draft 18's text; an End of Range within the prior group cannot be
    /// written there).
    EndOfRange {
        /// The range's last location.
        end: Location,
        /// They do not exist (End of Non-Existent Range), rather than unknown.
        missing: bool,
    },
}

/// What the prior item left for the next one's flags to refer to.
#[derive(Debug, Clone, Copy, Default)]
struct Prior {
    location: Option<Location>,
    /// The last object's subgroup (`Some(None)`: it was a datagram).
    subgroup: Option<Option<u64>>,
    priority: Option<u8>,
}

/// Reads and writes the items of one fetch stream, keeping what the next item's flags may
/// refer to.
#[derive(Debug, Clone)]
pub struct FetchObjects {
    draft: Draft,
    order: GroupOrder,
    prior: Prior,
}

impl FetchObjects {
    /// The items of a fetch stream for a FETCH with group order `order` (ascending unless
    /// the FETCH asked otherwise; it decides which way 18's group deltas go).
    pub fn new(draft: Draft, order: GroupOrder) -> Self {
        Self {
            draft,
            order,
            prior: Prior::default(),
        }
    }

    /// Reads the next item. Consumes from `buf` even when it fails; on
    /// [`DecodeError::Short`] decode again from the same bytes once more arrived.
    pub fn decode<B: Buf>(&mut self, buf: &mut B) -> Result<FetchItem, DecodeError> {
        if self.draft == Draft::D14 {
            return self.decode_explicit(buf).map(FetchItem::Object);
        }
        let draft = self.draft;
        let flags = read_int(buf, draft)?;
        if flags >= 0x80 {
            let missing = match flags {
                END_OF_NON_EXISTENT_RANGE => true,
                END_OF_UNKNOWN_RANGE => false,
                _ => return Err(DecodeError::InvalidValue("serialization flags")),
            };
            // Both ids are present (flags 0x08 and 0x04).
            let end = self.read_location(buf, 0x0c)?;
            self.prior.location = Some(end);
            return Ok(FetchItem::EndOfRange { end, missing });
        }
        let location = self.read_location(buf, flags)?;
        let subgroup = if flags & 0x40 != 0 {
            None
        } else {
            let prior = || {
                self.prior
                    .subgroup
                    .flatten()
                    .ok_or(DecodeError::InvalidValue("prior subgroup"))
            };
            Some(match flags & 0x03 {
                0 => 0,
                1 => prior()?,
                2 => prior()?
                    .checked_add(1)
                    .filter(|id| *id <= max_int(draft))
                    .ok_or(DecodeError::InvalidValue("subgroup id"))?,
                _ => read_int(buf, draft)?,
            })
        };
        let priority = if flags & 0x10 != 0 {
            read_u8(buf)?
        } else {
            self.prior
                .priority
                .ok_or(DecodeError::InvalidValue("prior priority"))?
        };
        let properties = if flags & 0x20 != 0 {
            read_properties(buf, draft)?
        } else {
            Parameters::default()
        };
        let payload_len = read_int(buf, draft)?;
        self.prior = Prior {
            location: Some(location),
            subgroup: Some(subgroup),
            priority: Some(priority),
        };
        Ok(FetchItem::Object(FetchObject {
            location,
            subgroup,
            priority,
            properties,
            payload_len,
            status: ObjectStatus::Normal,
        }))
    }

    /// Reads the group and object ids as `flags` say (16 on).
    fn read_location<B: Buf>(&self, buf: &mut B, flags: u64) -> Result<Location, DecodeError> {
        let draft = self.draft;
        let overflow = DecodeError::InvalidValue("fetch location");
        let prior = self.prior.location;
        let group_field = (flags & 0x08 != 0)
            .then(|| read_int(buf, draft))
            .transpose()?;
        let object_field = (flags & 0x04 != 0)
            .then(|| read_int(buf, draft))
            .transpose()?;
        let Some(prior) = prior else {
            // The first item spells out both, as absolute values.
            return match (group_field, object_field) {
                (Some(group), Some(object)) => Ok(Location { group, object }),
                _ => Err(DecodeError::InvalidValue(
                    "the first fetch object's location",
                )),
            };
        };
        let deltas = draft.has_fetch_deltas();
        let group = match group_field {
            None => prior.group,
            Some(group) if !deltas => group,
            Some(delta) => {
                let step = delta.checked_add(1).ok_or(overflow.clone())?;
                match self.order {
                    GroupOrder::Ascending => prior.group.checked_add(step),
                    GroupOrder::Descending => prior.group.checked_sub(step),
                }
                .ok_or(overflow.clone())?
            }
        };
        let object = match (object_field, group_field.is_some()) {
            (Some(object), _) if !deltas => object,
            (Some(object), true) => object,
            (Some(delta), false) => prior.object.checked_add(delta).ok_or(overflow.clone())?,
            (None, _) => prior.object.checked_add(1).ok_or(overflow.clone())?,
        };
        if group > max_int(draft) || object > max_int(draft) {
            return Err(overflow);
        }
        Ok(Location { group, object })
    }

    /// Reads draft 14's object, every field spelled out.
    fn decode_explicit<B: Buf>(&mut self, buf: &mut B) -> Result<FetchObject, DecodeError> {
        let draft = self.draft;
        let group = read_int(buf, draft)?;
        let subgroup = read_int(buf, draft)?;
        let object = read_int(buf, draft)?;
        let priority = read_u8(buf)?;
        let properties = read_properties(buf, draft)?;
        let (payload_len, status) = read_payload_status(buf, draft, &properties)?;
        Ok(FetchObject {
            location: Location { group, object },
            subgroup: Some(subgroup),
            priority,
            properties,
            payload_len,
            status,
        })
    }

    /// Writes the next item, leaving out what the prior item already says.
    pub fn encode<B: BufMut>(&mut self, item: &FetchItem, buf: &mut B) -> Result<(), EncodeError> {
        let draft = self.draft;
        let object = match item {
            FetchItem::EndOfRange { .. } if draft == Draft::D14 => {
                return Err(EncodeError::NotInVersion("End of Range"));
            }
            FetchItem::EndOfRange { end, missing } => {
                let flags = if *missing {
                    END_OF_NON_EXISTENT_RANGE
                } else {
                    END_OF_UNKNOWN_RANGE
                };
                write_int(buf, flags, draft, "serialization flags")?;
                self.write_location(buf, *end, true, true)?;
                self.prior.location = Some(*end);
                return Ok(());
            }
            FetchItem::Object(object) => object,
        };
        if draft == Draft::D14 {
            return self.encode_explicit(object, buf);
        }
        if object.status != ObjectStatus::Normal {
            return Err(EncodeError::NotInVersion("a status on a fetch stream"));
        }
        let prior = self.prior;
        let location = object.location;
        let same_group = prior.location.is_some_and(|p| p.group == location.group);
        let next_object = prior
            .location
            .is_some_and(|p| same_group && p.object.checked_add(1) == Some(location.object));
        let mut flags = 0u64;
        if !same_group {
            flags |= 0x08;
        }
        if !next_object {
            flags |= 0x04;
        }
        let prior_subgroup = prior.subgroup.flatten();
        match object.subgroup {
            None => flags |= 0x40,
            Some(0) => {}
            Some(id) if prior_subgroup == Some(id) => flags |= 0x01,
            Some(id) if prior_subgroup.and_then(|p| p.checked_add(1)) == Some(id) => flags |= 0x02,
            Some(_) => flags |= 0x03,
        }
        if prior.priority != Some(object.priority) {
            flags |= 0x10;
        }
        if !object.properties.0.is_empty() {
            flags |= 0x20;
        }
        write_int(buf, flags, draft, "serialization flags")?;
        self.write_location(buf, location, !same_group, !next_object)?;
        if flags & 0x43 == 0x03 {
            write_int(
                buf,
                object.subgroup.unwrap_or_default(),
                draft,
                "subgroup id",
            )?;
        }
        if flags & 0x10 != 0 {
            buf.put_u8(object.priority);
        }
        if flags & 0x20 != 0 {
            write_properties(buf, &object.properties, draft)?;
        }
        write_int(buf, object.payload_len, draft, "payload length")?;
        self.prior = Prior {
            location: Some(location),
            subgroup: Some(object.subgroup),
            priority: Some(object.priority),
        };
        Ok(())
    }

    /// Writes the group and object id fields the flags announced (16 on): absolute on 16
    /// and for 18's first item, deltas on 18 after it.
    fn write_location<B: BufMut>(
        &self,
        buf: &mut B,
        location: Location,
        group: bool,
        object: bool,
    ) -> Result<(), EncodeError> {
        let draft = self.draft;
        let prior = self.prior.location.filter(|_| draft.has_fetch_deltas());
        let backwards = EncodeError::InvalidValue("fetch group order");
        if group {
            let value = match prior {
                None => location.group,
                Some(prior) => match self.order {
                    GroupOrder::Ascending => location.group.checked_sub(prior.group),
                    GroupOrder::Descending => prior.group.checked_sub(location.group),
                }
                .and_then(|step| step.checked_sub(1))
                .ok_or(backwards)?,
            };
            write_int(buf, value, draft, "group id")?;
        }
        if object {
            let value = match prior {
                // A new group's object id is absolute; within a group, a delta.
                Some(prior) if !group => location
                    .object
                    .checked_sub(prior.object)
                    .ok_or(EncodeError::InvalidValue("fetch object order"))?,
                _ => location.object,
            };
            write_int(buf, value, draft, "object id")?;
        }
        Ok(())
    }

    fn encode_explicit<B: BufMut>(
        &mut self,
        object: &FetchObject,
        buf: &mut B,
    ) -> Result<(), EncodeError> {
        let draft = self.draft;
        let subgroup = object.subgroup.ok_or(EncodeError::NotInVersion(
            "a fetched datagram without a subgroup",
        ))?;
        if object.payload_len > 0 && object.status != ObjectStatus::Normal {
            return Err(EncodeError::InvalidValue("a status object with a payload"));
        }
        write_int(buf, object.location.group, draft, "group id")?;
        write_int(buf, subgroup, draft, "subgroup id")?;
        write_int(buf, object.location.object, draft, "object id")?;
        buf.put_u8(object.priority);
        write_properties(buf, &object.properties, draft)?;
        write_int(buf, object.payload_len, draft, "payload length")?;
        if object.payload_len == 0 {
            object.status.encode(buf, draft)?;
        }
        Ok(())
    }
}
