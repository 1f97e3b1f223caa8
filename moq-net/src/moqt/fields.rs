//! The structures messages share: [`Location`], [`Namespace`], the track name and the
//! reason phrase, with the bounds each draft sets on them.

use bytes::{Buf, BufMut, Bytes};

use super::Draft;
use super::int::{read_int, write_int};
use crate::coding::{DecodeError, EncodeError};

/// The most fields a Track Namespace holds (every draft).
pub const MAX_NAMESPACE_FIELDS: usize = 32;

/// The longest Full Track Name: the namespace's fields and the track name together
/// (every draft).
pub const MAX_FULL_TRACK_NAME_BYTES: usize = 4096;

/// The longest reason phrase (every draft).
pub const MAX_REASON_BYTES: usize = 1024;

/// An object's place in a track: `Group`, then `Object` (§ "Location Structure"). Ordered
/// as the drafts order them: by group, then by object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Location {
    /// The group id.
    pub group: u64,
    /// The object id within the group.
    pub object: u64,
}

impl Location {
    /// Reads a location.
    pub fn decode<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Ok(Self {
            group: read_int(buf, draft)?,
            object: read_int(buf, draft)?,
        })
    }

    /// Writes it.
    pub fn encode<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.group, draft, "location group")?;
        write_int(buf, self.object, draft, "location object")
    }
}

/// A Track Namespace: an ordered tuple of byte strings (§ "Track Naming"). Compared byte for
/// byte; no encoding is implied.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Namespace(pub Vec<Bytes>);

impl Namespace {
    /// A namespace of UTF-8 fields, for tests and applications that name tracks in text.
    pub fn from_strs<'a>(fields: impl IntoIterator<Item = &'a str>) -> Self {
        Self(
            fields
                .into_iter()
                .map(|f| Bytes::copy_from_slice(f.as_bytes()))
                .collect(),
        )
    }

    /// Bytes its fields hold, together.
    pub fn byte_len(&self) -> usize {
        self.0.iter().map(Bytes::len).sum()
    }

    /// Whether `self` starts with every field of `prefix`.
    pub fn starts_with(&self, prefix: &Namespace) -> bool {
        self.0.starts_with(&prefix.0)
    }

    /// Reads a namespace of a track: 1 to 32 fields up to draft 16 (0 to 32 from 18), each
    /// at least one byte from draft 16, at most [`MAX_FULL_TRACK_NAME_BYTES`] together.
    pub fn decode<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Self::decode_with(buf, draft, usize::from(!draft.has_empty_namespace()))
    }

    /// Reads a namespace prefix (SUBSCRIBE_NAMESPACE and its kin): as
    /// [`decode`](Self::decode), but an empty tuple (every namespace) is read on every
    /// draft. Draft 14's text asks for 1 to 32 fields and closes the session on none, yet
    /// deployed peers send none on 14 (moq-dev/moq's relay asks every draft-14 client for
    /// its namespaces so), and the meaning is plain: it is read, and never written on 14
    /// ([`Draft::has_empty_prefix`]).
    pub fn decode_prefix<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Self::decode_with(buf, draft, 0)
    }

    fn decode_with<B: Buf>(
        buf: &mut B,
        draft: Draft,
        min_fields: usize,
    ) -> Result<Self, DecodeError> {
        let count = read_int(buf, draft)?;
        if count > MAX_NAMESPACE_FIELDS as u64 {
            return Err(DecodeError::BoundsExceeded("namespace fields"));
        }
        if (count as usize) < min_fields {
            return Err(DecodeError::InvalidValue("empty namespace"));
        }
        let mut fields = Vec::with_capacity(count as usize);
        let mut total = 0;
        for _ in 0..count {
            let field = read_bytes(buf, draft, MAX_FULL_TRACK_NAME_BYTES - total, "namespace")?;
            if field.is_empty() && draft.has_nonempty_namespace_fields() {
                return Err(DecodeError::InvalidValue("empty namespace field"));
            }
            total += field.len();
            fields.push(field);
        }
        Ok(Self(fields))
    }

    /// Writes it, refusing what the receiver would close the session for.
    pub fn encode<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        if self.0.len() > MAX_NAMESPACE_FIELDS || self.byte_len() > MAX_FULL_TRACK_NAME_BYTES {
            return Err(EncodeError::BoundsExceeded("namespace"));
        }
        if draft.has_nonempty_namespace_fields() && self.0.iter().any(Bytes::is_empty) {
            return Err(EncodeError::InvalidValue("empty namespace field"));
        }
        write_int(buf, self.0.len() as u64, draft, "namespace fields")?;
        for field in &self.0 {
            write_bytes(buf, field, draft)?;
        }
        Ok(())
    }
}

/// Reads a track name after `namespace`: bytes, the two together at most
/// [`MAX_FULL_TRACK_NAME_BYTES`].
pub fn read_track_name<B: Buf>(
    buf: &mut B,
    draft: Draft,
    namespace: &Namespace,
) -> Result<Bytes, DecodeError> {
    let room = MAX_FULL_TRACK_NAME_BYTES.saturating_sub(namespace.byte_len());
    read_bytes(buf, draft, room, "full track name")
}

/// Writes a track name after `namespace`, refusing a Full Track Name over the bound.
pub fn write_track_name<B: BufMut>(
    buf: &mut B,
    name: &[u8],
    draft: Draft,
    namespace: &Namespace,
) -> Result<(), EncodeError> {
    if namespace.byte_len() + name.len() > MAX_FULL_TRACK_NAME_BYTES {
        return Err(EncodeError::BoundsExceeded("full track name"));
    }
    write_bytes(buf, name, draft)
}

/// Reads a reason phrase: at most [`MAX_REASON_BYTES`] of UTF-8.
pub fn read_reason<B: Buf>(buf: &mut B, draft: Draft) -> Result<String, DecodeError> {
    let bytes = read_bytes(buf, draft, MAX_REASON_BYTES, "reason phrase")?;
    String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::InvalidString)
}

/// Writes a reason phrase, cut at a character boundary to [`MAX_REASON_BYTES`]: a reason is
/// diagnostic, and a long one must not make the message it closes fail.
pub fn write_reason<B: BufMut>(buf: &mut B, reason: &str, draft: Draft) -> Result<(), EncodeError> {
    let mut end = reason.len().min(MAX_REASON_BYTES);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    write_bytes(buf, &reason.as_bytes()[..end], draft)
}

/// Reads `Length` and that many bytes, at most `max`.
pub(crate) fn read_bytes<B: Buf>(
    buf: &mut B,
    draft: Draft,
    max: usize,
    field: &'static str,
) -> Result<Bytes, DecodeError> {
    let len = read_int(buf, draft)?;
    if len > max as u64 {
        return Err(DecodeError::BoundsExceeded(field));
    }
    let len = len as usize;
    if buf.remaining() < len {
        return Err(DecodeError::Short);
    }
    Ok(buf.copy_to_bytes(len))
}

/// Writes `Length` and the bytes.
pub(crate) fn write_bytes<B: BufMut>(
    buf: &mut B,
    bytes: &[u8],
    draft: Draft,
) -> Result<(), EncodeError> {
    write_int(buf, bytes.len() as u64, draft, "length")?;
    buf.put_slice(bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(namespace: &Namespace, draft: Draft) -> Result<Namespace, DecodeError> {
        let mut out = Vec::new();
        namespace.encode(&mut out, draft).unwrap();
        Namespace::decode(&mut &out[..], draft)
    }

    #[test]
    fn a_namespace_is_a_count_then_length_prefixed_fields() {
        let namespace = Namespace::from_strs(["room", "alice"]);
        let mut out = Vec::new();
        namespace.encode(&mut out, Draft::D14).unwrap();
        assert_eq!(out, b"\x02\x04room\x05alice");
        for draft in Draft::ALL {
            assert_eq!(round_trip(&namespace, draft), Ok(namespace.clone()));
        }
    }

    #[test]
    fn each_draft_bounds_the_namespace_as_its_text_says() {
        // No fields: a violation up to 16, allowed from 18; as a prefix, read on every
        // draft (14's text forbids it, deployed peers send it).
        let empty = [0x00];
        assert!(Namespace::decode(&mut &empty[..], Draft::D14).is_err());
        assert!(Namespace::decode(&mut &empty[..], Draft::D16).is_err());
        assert_eq!(
            Namespace::decode(&mut &empty[..], Draft::D18),
            Ok(Namespace::default())
        );
        assert_eq!(
            Namespace::decode_prefix(&mut &empty[..], Draft::D14),
            Ok(Namespace::default())
        );
        assert_eq!(
            Namespace::decode_prefix(&mut &empty[..], Draft::D16),
            Ok(Namespace::default())
        );
        // An empty field: allowed on 14 only.
        let empty_field = [0x01, 0x00];
        assert!(Namespace::decode(&mut &empty_field[..], Draft::D14).is_ok());
        assert_eq!(
            Namespace::decode(&mut &empty_field[..], Draft::D16),
            Err(DecodeError::InvalidValue("empty namespace field"))
        );
        // 33 fields.
        let mut many = vec![33];
        for _ in 0..33 {
            many.extend_from_slice(&[1, b'x']);
        }
        assert_eq!(
            Namespace::decode(&mut &many[..], Draft::D18),
            Err(DecodeError::BoundsExceeded("namespace fields"))
        );
    }

    #[test]
    fn a_full_track_name_over_4096_bytes_is_refused() {
        let namespace = Namespace(vec![Bytes::from(vec![b'n'; 4000])]);
        let mut out = Vec::new();
        namespace.encode(&mut out, Draft::D16).unwrap();
        write_bytes(&mut out, &[b't'; 97], Draft::D16).unwrap();
        let mut buf = &out[..];
        let decoded = Namespace::decode(&mut buf, Draft::D16).unwrap();
        assert_eq!(
            read_track_name(&mut buf, Draft::D16, &decoded),
            Err(DecodeError::BoundsExceeded("full track name"))
        );
        assert_eq!(
            write_track_name(&mut Vec::new(), &[b't'; 97], Draft::D16, &namespace),
            Err(EncodeError::BoundsExceeded("full track name"))
        );
    }

    #[test]
    fn a_reason_is_bounded_and_cut_at_a_character() {
        let long = "é".repeat(600); // 1,200 bytes
        let mut out = Vec::new();
        write_reason(&mut out, &long, Draft::D16).unwrap();
        let read = read_reason(&mut &out[..], Draft::D16).unwrap();
        assert_eq!(read.len(), 1024);
        let over = [0x44, 0x01]; // length 1,025
        assert_eq!(
            read_reason(&mut &over[..], Draft::D16),
            Err(DecodeError::BoundsExceeded("reason phrase"))
        );
        assert_eq!(
            read_reason(&mut &[0x01, 0xff][..], Draft::D16),
            Err(DecodeError::InvalidString)
        );
    }

    #[test]
    fn locations_order_by_group_then_object() {
        let a = Location {
            group: 1,
            object: 9,
        };
        let b = Location {
            group: 2,
            object: 0,
        };
        assert!(a < b);
        let mut out = Vec::new();
        b.encode(&mut out, Draft::D18).unwrap();
        assert_eq!(Location::decode(&mut &out[..], Draft::D18), Ok(b));
    }
}
