//! What a subscription asks for: its [`Filter`] (§ "Subscription Filters") and
//! [`GroupOrder`].

use bytes::{Buf, BufMut};

use super::Draft;
use super::fields::Location;
use super::int::{read_int, write_int};
use crate::coding::{DecodeError, EncodeError};

/// Which objects of a track a subscription passes. Without one, every object passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// From the start of the group after the largest object (type `0x1`).
    NextGroupStart,
    /// From the object after the largest object (type `0x2`).
    LargestObject,
    /// From `start`, open-ended (type `0x3`).
    AbsoluteStart(Location),
    /// From `start` through the end of group `end_group` (type `0x4`). On the wire, 14 and
    /// 16 carry the end group itself, 18 its distance from the start's group.
    AbsoluteRange {
        /// The first object that passes.
        start: Location,
        /// The last group that passes, whole.
        end_group: u64,
    },
}

impl Filter {
    fn kind(&self) -> u64 {
        match self {
            Filter::NextGroupStart => 0x1,
            Filter::LargestObject => 0x2,
            Filter::AbsoluteStart(_) => 0x3,
            Filter::AbsoluteRange { .. } => 0x4,
        }
    }

    /// Reads `Filter Type`, then a start location and an end group where the type has
    /// them. A type the drafts do not define, or a range that ends before it starts, is a
    /// PROTOCOL_VIOLATION.
    pub fn decode<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Ok(match read_int(buf, draft)? {
            0x1 => Filter::NextGroupStart,
            0x2 => Filter::LargestObject,
            0x3 => Filter::AbsoluteStart(Location::decode(buf, draft)?),
            0x4 => {
                let start = Location::decode(buf, draft)?;
                let end = read_int(buf, draft)?;
                let end_group = if draft.has_end_group_delta() {
                    start
                        .group
                        .checked_add(end)
                        .ok_or(DecodeError::InvalidValue("filter end group"))?
                } else if end < start.group {
                    return Err(DecodeError::InvalidValue("filter end group"));
                } else {
                    end
                };
                Filter::AbsoluteRange { start, end_group }
            }
            _ => return Err(DecodeError::InvalidValue("filter type")),
        })
    }

    /// Writes it; a range that ends before it starts is refused.
    pub fn encode<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.kind(), draft, "filter type")?;
        match self {
            Filter::NextGroupStart | Filter::LargestObject => Ok(()),
            Filter::AbsoluteStart(start) => start.encode(buf, draft),
            Filter::AbsoluteRange { start, end_group } => {
                if *end_group < start.group {
                    return Err(EncodeError::InvalidValue("filter end group"));
                }
                start.encode(buf, draft)?;
                let end = if draft.has_end_group_delta() {
                    end_group - start.group
                } else {
                    *end_group
                };
                write_int(buf, end, draft, "filter end group")
            }
        }
    }
}

/// The order groups are delivered in when they compete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupOrder {
    /// Lowest group id first (`0x1`).
    Ascending,
    /// Highest group id first (`0x2`).
    Descending,
}

impl GroupOrder {
    /// Its value on the wire.
    pub fn value(self) -> u8 {
        match self {
            GroupOrder::Ascending => 1,
            GroupOrder::Descending => 2,
        }
    }

    /// The order `value` names; `0` and anything above `2` are not an order (14's SUBSCRIBE
    /// reads `0` as "the publisher's").
    pub fn from_value(value: u64) -> Result<Self, DecodeError> {
        match value {
            1 => Ok(GroupOrder::Ascending),
            2 => Ok(GroupOrder::Descending),
            _ => Err(DecodeError::InvalidValue("group order")),
        }
    }
}

/// Reads draft 14's `Group Order (8)` field of a request: `0` for the publisher's order.
pub(crate) fn read_optional_order<B: Buf>(buf: &mut B) -> Result<Option<GroupOrder>, DecodeError> {
    match read_u8(buf)? {
        0 => Ok(None),
        value => GroupOrder::from_value(u64::from(value)).map(Some),
    }
}

/// Reads one byte.
pub(crate) fn read_u8<B: Buf>(buf: &mut B) -> Result<u8, DecodeError> {
    if !buf.has_remaining() {
        return Err(DecodeError::Short);
    }
    Ok(buf.get_u8())
}

/// Reads a one-byte flag that must be 0 or 1.
pub(crate) fn read_flag<B: Buf>(buf: &mut B, field: &'static str) -> Result<bool, DecodeError> {
    match read_u8(buf)? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(DecodeError::InvalidValue(field)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(filter: Filter, draft: Draft) -> Vec<u8> {
        let mut out = Vec::new();
        filter.encode(&mut out, draft).unwrap();
        assert_eq!(Filter::decode(&mut &out[..], draft), Ok(filter));
        out
    }

    #[test]
    fn a_range_carries_its_end_group_or_its_distance() {
        let range = Filter::AbsoluteRange {
            start: Location {
                group: 10,
                object: 2,
            },
            end_group: 12,
        };
        assert_eq!(round_trip(range, Draft::D16), [0x04, 0x0a, 0x02, 0x0c]);
        assert_eq!(round_trip(range, Draft::D18), [0x04, 0x0a, 0x02, 0x02]);
        assert_eq!(round_trip(Filter::LargestObject, Draft::D14), [0x02]);
        assert_eq!(
            round_trip(Filter::AbsoluteStart(Location::default()), Draft::D18),
            [0x03, 0x00, 0x00]
        );
    }

    #[test]
    fn bad_filters_are_refused() {
        assert_eq!(
            Filter::decode(&mut &[0x05][..], Draft::D16),
            Err(DecodeError::InvalidValue("filter type"))
        );
        // Ends at group 9, starts at 10.
        assert_eq!(
            Filter::decode(&mut &[0x04, 0x0a, 0x00, 0x09][..], Draft::D14),
            Err(DecodeError::InvalidValue("filter end group"))
        );
        // Draft 18: start group u64::MAX, delta 1.
        let mut past = vec![0x04, 0xff];
        past.extend_from_slice(&u64::MAX.to_be_bytes());
        past.extend_from_slice(&[0x00, 0x01]);
        assert_eq!(
            Filter::decode(&mut &past[..], Draft::D18),
            Err(DecodeError::InvalidValue("filter end group"))
        );
    }

    #[test]
    fn group_orders() {
        assert_eq!(read_optional_order(&mut &[0][..]), Ok(None));
        assert_eq!(
            read_optional_order(&mut &[2][..]),
            Ok(Some(GroupOrder::Descending))
        );
        assert!(read_optional_order(&mut &[3][..]).is_err());
        assert_eq!(
            read_flag(&mut &[2][..], "forward"),
            Err(DecodeError::InvalidValue("forward"))
        );
    }
}
