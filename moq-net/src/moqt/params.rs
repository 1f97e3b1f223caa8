//! Key-Value-Pairs: setup options, message parameters and object extension headers.
//!
//! A pair is `Type`, then for an even type one integer, for an odd type `Length` and that
//! many bytes (at most 2^16 − 1). From draft 16 the type on the wire is the delta from the
//! previous pair's type (the first from 0), so a list goes out sorted by type.
//! Unknown types are kept, in order, so that a relay can pass them on and a receiver can
//! ignore them as the drafts require; known ones are read by the message that owns them.

use bytes::{Buf, BufMut, Bytes};

use super::Draft;
use super::int::{read_int, write_int};
use crate::coding::{DecodeError, EncodeError};

/// The longest value of an odd-typed pair (every draft: 2^16 − 1 bytes).
pub const MAX_VALUE_BYTES: usize = u16::MAX as usize;

/// The most pairs one list may hold here. The drafts bound only the message (2^16 − 1
/// bytes); this bounds the work and memory one message can ask for.
pub const MAX_PARAMETERS: usize = 256;

/// One pair's value: an integer (even type) or bytes (odd type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// The value of an even type.
    Int(u64),
    /// The value of an odd type.
    Bytes(Bytes),
}

/// One Key-Value-Pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parameter {
    /// Its type; even for [`Value::Int`], odd for [`Value::Bytes`].
    pub kind: u64,
    /// Its value.
    pub value: Value,
}

impl Parameter {
    /// An even-typed pair.
    pub fn int(kind: u64, value: u64) -> Self {
        Self {
            kind,
            value: Value::Int(value),
        }
    }

    /// An odd-typed pair.
    pub fn bytes(kind: u64, value: impl Into<Bytes>) -> Self {
        Self {
            kind,
            value: Value::Bytes(value.into()),
        }
    }
}

/// An ordered list of Key-Value-Pairs, duplicates allowed (the drafts allow them for types
/// a receiver does not know).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parameters(pub Vec<Parameter>);

impl Parameters {
    /// The first integer value of `kind`, if any. A bytes value under an even type cannot
    /// be built by decoding; it reads as absent.
    pub fn int(&self, kind: u64) -> Option<u64> {
        self.0.iter().find_map(|p| match p.value {
            Value::Int(value) if p.kind == kind => Some(value),
            _ => None,
        })
    }

    /// The first bytes value of `kind`, if any.
    pub fn bytes(&self, kind: u64) -> Option<&Bytes> {
        self.0.iter().find_map(|p| match &p.value {
            Value::Bytes(value) if p.kind == kind => Some(value),
            _ => None,
        })
    }

    /// How many pairs of `kind` the list holds.
    pub fn count(&self, kind: u64) -> usize {
        self.0.iter().filter(|p| p.kind == kind).count()
    }

    /// Writes the pairs (without a count), sorted by type where `draft` delta-encodes types
    /// (the sort is stable: pairs of one type keep their order).
    pub fn encode<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        let mut pairs: Vec<&Parameter> = self.0.iter().collect();
        if draft.has_delta_types() {
            pairs.sort_by_key(|p| p.kind);
        }
        let mut previous = 0;
        for pair in pairs {
            let wire_type = if draft.has_delta_types() {
                pair.kind - previous
            } else {
                pair.kind
            };
            previous = pair.kind;
            write_int(buf, wire_type, draft, "parameter type")?;
            match (&pair.value, pair.kind % 2) {
                (Value::Int(value), 0) => write_int(buf, *value, draft, "parameter value")?,
                (Value::Bytes(value), 1) => {
                    if value.len() > MAX_VALUE_BYTES {
                        return Err(EncodeError::BoundsExceeded("parameter value"));
                    }
                    write_int(buf, value.len() as u64, draft, "parameter length")?;
                    buf.put_slice(value);
                }
                _ => return Err(EncodeError::InvalidValue("parameter type parity")),
            }
        }
        Ok(())
    }

    /// Writes `Count` and the pairs.
    pub fn encode_counted<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.0.len() as u64, draft, "parameter count")?;
        self.encode(buf, draft)
    }

    /// Reads `Count` and that many pairs.
    pub fn decode_counted<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let count = read_int(buf, draft)?;
        if count > MAX_PARAMETERS as u64 {
            return Err(DecodeError::TooMany("parameters"));
        }
        let mut reader = Reader::new(draft);
        let mut pairs = Vec::with_capacity(count as usize);
        for _ in 0..count {
            pairs.push(reader.next(buf)?);
        }
        Ok(Self(pairs))
    }

    /// Reads pairs until `buf` ends (draft 18's SETUP: options span the message).
    pub fn decode_to_end<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let mut reader = Reader::new(draft);
        let mut pairs = Vec::new();
        while buf.has_remaining() {
            if pairs.len() == MAX_PARAMETERS {
                return Err(DecodeError::TooMany("parameters"));
            }
            pairs.push(reader.next(buf)?);
        }
        Ok(Self(pairs))
    }
}

/// Reads one pair after another, carrying the previous type for delta decoding.
struct Reader {
    draft: Draft,
    previous: u64,
}

impl Reader {
    fn new(draft: Draft) -> Self {
        Self { draft, previous: 0 }
    }

    fn next<B: Buf>(&mut self, buf: &mut B) -> Result<Parameter, DecodeError> {
        let wire_type = read_int(buf, self.draft)?;
        let kind = if self.draft.has_delta_types() {
            // "The previous Type value plus the Delta Type MUST NOT be greater than
            // 2^64 − 1": a PROTOCOL_VIOLATION.
            self.previous
                .checked_add(wire_type)
                .ok_or(DecodeError::InvalidValue("parameter type delta"))?
        } else {
            wire_type
        };
        self.previous = kind;
        let value = if kind % 2 == 0 {
            Value::Int(read_int(buf, self.draft)?)
        } else {
            let len = read_int(buf, self.draft)?;
            if len > MAX_VALUE_BYTES as u64 {
                return Err(DecodeError::BoundsExceeded("parameter value"));
            }
            let len = len as usize;
            if buf.remaining() < len {
                return Err(DecodeError::Short);
            }
            Value::Bytes(buf.copy_to_bytes(len))
        };
        Ok(Parameter { kind, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(params: &Parameters, draft: Draft) -> Vec<u8> {
        let mut out = Vec::new();
        params.encode_counted(&mut out, draft).unwrap();
        out
    }

    #[test]
    fn draft_14_writes_each_type_whole() {
        let params = Parameters(vec![Parameter::bytes(0x05, "a"), Parameter::int(0x02, 100)]);
        // Count 2; type 5, length 1, "a"; type 2, varint 100 (0x4064).
        assert_eq!(
            encoded(&params, Draft::D14),
            [0x02, 0x05, 0x01, b'a', 0x02, 0x40, 0x64]
        );
        assert_eq!(
            Parameters::decode_counted(&mut &encoded(&params, Draft::D14)[..], Draft::D14),
            Ok(params)
        );
    }

    #[test]
    fn from_draft_16_types_are_deltas_in_ascending_order() {
        let params = Parameters(vec![Parameter::bytes(0x05, "a"), Parameter::int(0x02, 100)]);
        // Sorted: type 2 (delta 2), then type 5 (delta 3).
        assert_eq!(
            encoded(&params, Draft::D16),
            [0x02, 0x02, 0x40, 0x64, 0x03, 0x01, b'a']
        );
        let sorted = Parameters(vec![params.0[1].clone(), params.0[0].clone()]);
        assert_eq!(
            Parameters::decode_counted(&mut &encoded(&params, Draft::D16)[..], Draft::D16),
            Ok(sorted.clone())
        );
        // Draft 18 writes the same pairs with vi64 integers: 100 is one byte there.
        assert_eq!(
            encoded(&params, Draft::D18),
            [0x02, 0x02, 0x64, 0x03, 0x01, b'a']
        );
        assert_eq!(
            Parameters::decode_counted(&mut &encoded(&params, Draft::D18)[..], Draft::D18),
            Ok(sorted)
        );
    }

    #[test]
    fn repeated_types_are_kept_in_order() {
        let params = Parameters(vec![
            Parameter::bytes(0x03, "x"),
            Parameter::bytes(0x03, "y"),
        ]);
        let decoded =
            Parameters::decode_counted(&mut &encoded(&params, Draft::D16)[..], Draft::D16);
        assert_eq!(decoded, Ok(params.clone()));
        assert_eq!(params.count(0x03), 2);
        assert_eq!(params.bytes(0x03).map(|b| &b[..]), Some(&b"x"[..]));
    }

    #[test]
    fn a_type_past_two_to_the_64_is_refused() {
        // vi64: delta u64::MAX, then delta 1.
        let mut bytes = vec![0x02, 0xff];
        bytes.extend_from_slice(&u64::MAX.to_be_bytes());
        bytes.extend_from_slice(&[0x00, 0x01, 0x00]);
        assert_eq!(
            Parameters::decode_counted(&mut &bytes[..], Draft::D18),
            Err(DecodeError::InvalidValue("parameter type delta"))
        );
    }

    #[test]
    fn bounds_hold() {
        // A value over 2^16 − 1 bytes.
        let bytes = [0x01, 0x01, 0x80, 0x01, 0x00, 0x00];
        assert_eq!(
            Parameters::decode_counted(&mut &bytes[..], Draft::D14),
            Err(DecodeError::BoundsExceeded("parameter value"))
        );
        // More pairs than MAX_PARAMETERS.
        let mut bytes = Vec::new();
        write_int(&mut bytes, MAX_PARAMETERS as u64 + 1, Draft::D16, "count").unwrap();
        assert_eq!(
            Parameters::decode_counted(&mut &bytes[..], Draft::D16),
            Err(DecodeError::TooMany("parameters"))
        );
        // A bytes value under an even type cannot be written.
        let wrong = Parameters(vec![Parameter::bytes(0x02, "a")]);
        assert_eq!(
            wrong.encode(&mut Vec::new(), Draft::D14),
            Err(EncodeError::InvalidValue("parameter type parity"))
        );
        // A truncated value asks for more.
        assert_eq!(
            Parameters::decode_counted(&mut &[0x01, 0x01, 0x03, b'a'][..], Draft::D14),
            Err(DecodeError::Short)
        );
    }

    #[test]
    fn setup_options_run_to_the_end_on_draft_18() {
        let params = Parameters(vec![
            Parameter::bytes(0x01, "/chat"),
            Parameter::int(0x04, 0),
        ]);
        let mut out = Vec::new();
        params.encode(&mut out, Draft::D18).unwrap();
        assert_eq!(
            Parameters::decode_to_end(&mut &out[..], Draft::D18),
            Ok(params)
        );
    }
}
