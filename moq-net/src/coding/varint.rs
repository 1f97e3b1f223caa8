//! QUIC variable-length integers (RFC 9000 §16), which every moq-lite version uses.
//!
//! The two high bits of the first byte give the length (1, 2, 4 or 8 bytes); the rest is the
//! value, big-endian. Decoding accepts any length (a non-minimal encoding is valid, spec:
//! moq-lite-05 vectors, "SUBSCRIBE_END with a non-minimal varint"); encoding always uses the
//! shortest.

use bytes::{Buf, BufMut};

use super::{DecodeError, EncodeError};

/// The largest value a varint carries: 2^62 − 1.
pub const MAX_VARINT: u64 = (1 << 62) - 1;

/// Reads a varint.
pub fn read_varint<B: Buf>(buf: &mut B) -> Result<u64, DecodeError> {
    if !buf.has_remaining() {
        return Err(DecodeError::Short);
    }
    let first = buf.chunk()[0];
    let len = 1usize << (first >> 6);
    if buf.remaining() < len {
        return Err(DecodeError::Short);
    }
    let value = match len {
        1 => u64::from(buf.get_u8()),
        2 => u64::from(buf.get_u16()),
        4 => u64::from(buf.get_u32()),
        _ => buf.get_u64(),
    };
    // Clear the two length bits.
    Ok(value & (u64::MAX >> (64 - 8 * len as u32 + 2)))
}

/// Writes `value` as the shortest varint; `field` names it in the error if it is too large.
pub fn write_varint<B: BufMut>(
    buf: &mut B,
    value: u64,
    field: &'static str,
) -> Result<(), EncodeError> {
    match value {
        0..=0x3f => buf.put_u8(value as u8),
        0x40..=0x3fff => buf.put_u16(0x4000 | value as u16),
        0x4000..=0x3fff_ffff => buf.put_u32(0x8000_0000 | value as u32),
        0x4000_0000..=MAX_VARINT => buf.put_u64(0xc000_0000_0000_0000 | value),
        _ => return Err(EncodeError::BoundsExceeded(field)),
    }
    Ok(())
}

/// How many bytes [`write_varint`] uses for `value` (8 for values it rejects).
pub fn varint_len(value: u64) -> usize {
    match value {
        0..=0x3f => 1,
        0x40..=0x3fff => 2,
        0x4000..=0x3fff_ffff => 4,
        _ => 8,
    }
}

/// Zigzag-encodes a signed value: `(n << 1) ^ (n >> 63)`, so small magnitudes of either sign
/// are small (spec: moq-lite-05, "Zigzag").
pub fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(value: u64) -> Vec<u8> {
        let mut buf = Vec::new();
        write_varint(&mut buf, value, "test").unwrap();
        buf
    }

    #[test]
    fn rfc9000_examples() {
        // RFC 9000 appendix A.1.
        let examples: [(&[u8], u64); 4] = [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
        ];
        for (bytes, value) in examples {
            assert_eq!(read_varint(&mut &bytes[..]), Ok(value));
            assert_eq!(encoded(value), bytes);
            assert_eq!(varint_len(value), bytes.len());
        }
        // A non-minimal encoding decodes.
        assert_eq!(read_varint(&mut &[0x40, 0x25][..]), Ok(37));
    }

    #[test]
    fn bounds() {
        assert_eq!(encoded(MAX_VARINT), [0xff; 8]);
        assert_eq!(
            write_varint(&mut Vec::new(), MAX_VARINT + 1, "field"),
            Err(EncodeError::BoundsExceeded("field"))
        );
        for short in [&[][..], &[0x40], &[0x80, 0, 0], &[0xc0, 0, 0, 0, 0, 0, 0]] {
            assert_eq!(
                read_varint(&mut &short[..]),
                Err(DecodeError::Short),
                "{short:?}"
            );
        }
    }

    #[test]
    fn zigzag_round_trips() {
        for value in [0, 1, -1, 33, -13, i64::MAX, i64::MIN, 1_700_000_000_000] {
            assert_eq!(unzigzag(zigzag(value)), value);
        }
        assert_eq!(zigzag(-13), 25);
        assert_eq!(zigzag(33), 66);
        assert_eq!(zigzag(-1000), 1999);
    }
}
