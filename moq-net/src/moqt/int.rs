//! The integers of each draft: QUIC varints (RFC 9000 §16) up to draft 17, `vi64` from 18.
//!
//! `vi64` (draft 18, "Variable-Length Integers"): the number of leading one bits of the
//! first byte, plus one, is the length in bytes, 1 to 8, and the bits after the first zero
//! are the value, big-endian; a first byte of eight ones is followed by the whole 64-bit
//! value (9 bytes). Decoding accepts any length that holds the value; encoding uses the
//! shortest.

use bytes::{Buf, BufMut};

use super::Draft;
use crate::coding::varint::{read_varint, varint_len, write_varint};
use crate::coding::{DecodeError, EncodeError};

/// Reads an integer as `draft` encodes it.
pub fn read_int<B: Buf>(buf: &mut B, draft: Draft) -> Result<u64, DecodeError> {
    if draft.has_vi64() {
        read_vi64(buf)
    } else {
        read_varint(buf)
    }
}

/// Writes `value` as `draft` encodes it, in the fewest bytes; `field` names it in the error
/// if the draft cannot carry it (over 2^62 − 1 before 18).
pub fn write_int<B: BufMut>(
    buf: &mut B,
    value: u64,
    draft: Draft,
    field: &'static str,
) -> Result<(), EncodeError> {
    if draft.has_vi64() {
        write_vi64(buf, value);
        Ok(())
    } else {
        write_varint(buf, value, field)
    }
}

/// The largest integer `draft` carries: 2^62 − 1 before 18, 2^64 − 1 from 18. A value a
/// decoder computes (an id from a delta) past it is a PROTOCOL_VIOLATION: the sender could
/// not have written it.
pub fn max_int(draft: Draft) -> u64 {
    if draft.has_vi64() {
        u64::MAX
    } else {
        crate::coding::varint::MAX_VARINT
    }
}

/// How many bytes [`write_int`] uses for `value` on `draft`.
pub fn int_len(value: u64, draft: Draft) -> usize {
    if draft.has_vi64() {
        vi64_len(value)
    } else {
        varint_len(value)
    }
}

/// Reads a `vi64`.
pub fn read_vi64<B: Buf>(buf: &mut B) -> Result<u64, DecodeError> {
    if !buf.has_remaining() {
        return Err(DecodeError::Short);
    }
    let first = buf.chunk()[0];
    let ones = first.leading_ones() as usize;
    let len = if ones == 8 { 9 } else { ones + 1 };
    if buf.remaining() < len {
        return Err(DecodeError::Short);
    }
    buf.advance(1);
    if len == 9 {
        return Ok(buf.get_u64());
    }
    // The bits after the prefix (`len` bits: the ones and their closing zero).
    let mut value = u64::from(first) & (0xff >> len);
    for _ in 1..len {
        value = (value << 8) | u64::from(buf.get_u8());
    }
    Ok(value)
}

/// Writes `value` as the shortest `vi64`.
pub fn write_vi64<B: BufMut>(buf: &mut B, value: u64) {
    let len = vi64_len(value);
    if len == 9 {
        buf.put_u8(0xff);
        buf.put_u64(value);
        return;
    }
    // `len` − 1 leading ones, then a zero, then the value's top bits.
    let prefix = !(0xffu8 >> (len - 1));
    let bytes = value.to_be_bytes();
    let mut out = [0u8; 8];
    out[8 - len..].copy_from_slice(&bytes[8 - len..]);
    out[8 - len] |= prefix;
    buf.put_slice(&out[8 - len..]);
}

/// How many bytes [`write_vi64`] uses for `value`: the smallest `len` with `7 × len` usable
/// bits that hold it, or 9.
pub fn vi64_len(value: u64) -> usize {
    let bits = 64 - value.leading_zeros() as usize;
    if bits > 56 {
        9
    } else {
        bits.div_ceil(7).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example encodings of draft 18, "Variable-Length Integers".
    const DRAFT_18_EXAMPLES: &[(&str, u64)] = &[
        ("25", 37),
        ("8025", 37),
        ("bbbd", 15_293),
        ("ed7f3e7d", 226_442_877),
        ("faa1a0e403d8", 2_893_212_287_960),
        ("fc8998abc66bc0", 151_288_809_941_952),
        ("fefa318fa8e3ca11", 70_423_237_261_249_041),
        ("ffffffffffffffffff", 18_446_744_073_709_551_615),
    ];

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn the_draft_examples_decode() {
        for (bytes, value) in DRAFT_18_EXAMPLES {
            let bytes = hex(bytes);
            let mut buf = &bytes[..];
            assert_eq!(read_vi64(&mut buf), Ok(*value), "{bytes:02x?}");
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn the_draft_examples_encode_when_shortest() {
        // Every example but the non-minimal 0x8025 is the shortest form.
        for (bytes, value) in DRAFT_18_EXAMPLES.iter().filter(|(b, _)| *b != "8025") {
            let mut out = Vec::new();
            write_vi64(&mut out, *value);
            assert_eq!(out, hex(bytes), "{value}");
            assert_eq!(vi64_len(*value), out.len());
        }
    }

    #[test]
    fn every_length_boundary_round_trips() {
        for len in 1..=8u32 {
            let max = (1u64 << (7 * len)) - 1;
            for value in [max, max + 1] {
                let mut out = Vec::new();
                write_vi64(&mut out, value);
                assert_eq!(read_vi64(&mut &out[..]), Ok(value));
            }
            assert_eq!(vi64_len(max), len as usize);
        }
        assert_eq!(vi64_len(0), 1);
        assert_eq!(vi64_len(u64::MAX), 9);
    }

    #[test]
    fn a_truncated_integer_asks_for_more() {
        for (bytes, _) in DRAFT_18_EXAMPLES {
            let bytes = hex(bytes);
            for cut in 0..bytes.len() {
                assert_eq!(read_vi64(&mut &bytes[..cut]), Err(DecodeError::Short));
            }
        }
    }

    #[test]
    fn drafts_before_18_use_quic_varints() {
        let mut out = Vec::new();
        write_int(&mut out, 15_293, Draft::D16, "test").unwrap();
        assert_eq!(out, [0x7b, 0xbd]);
        assert_eq!(read_int(&mut &out[..], Draft::D14), Ok(15_293));
        assert_eq!(
            write_int(&mut Vec::new(), 1 << 62, Draft::D16, "test"),
            Err(EncodeError::BoundsExceeded("test"))
        );
        assert!(write_int(&mut Vec::new(), 1 << 62, Draft::D18, "test").is_ok());
    }
}
