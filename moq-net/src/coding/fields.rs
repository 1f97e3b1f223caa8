//! The field types messages are made of (spec: moq-lite-05, "Primitives"): strings, paths,
//! raw bytes, optional groups and durations, each with its bounds.

use std::time::Duration;

use bytes::{Buf, BufMut};

use super::varint::{read_varint, write_varint};
use super::{DecodeError, EncodeError};
use crate::model::Path;

/// A broadcast path has at most this many `/`-separated parts.
pub const MAX_PATH_PARTS: usize = 32;

pub(crate) fn read_u8<B: Buf>(buf: &mut B) -> Result<u8, DecodeError> {
    if !buf.has_remaining() {
        return Err(DecodeError::Short);
    }
    Ok(buf.get_u8())
}

/// `ordered` is one raw byte, and any non-zero value means true.
pub(crate) fn read_ordered<B: Buf>(buf: &mut B) -> Result<bool, DecodeError> {
    Ok(read_u8(buf)? != 0)
}

pub(crate) fn write_ordered<B: BufMut>(buf: &mut B, ordered: bool) {
    buf.put_u8(u8::from(ordered));
}

/// A length-prefixed byte string, taken out of `buf` without copying when `buf` is `Bytes`.
pub(crate) fn read_bytes<B: Buf>(buf: &mut B) -> Result<bytes::Bytes, DecodeError> {
    let len = read_varint(buf)?;
    if (buf.remaining() as u64) < len {
        return Err(DecodeError::Short);
    }
    Ok(buf.copy_to_bytes(len as usize))
}

/// A length-prefixed UTF-8 string.
pub(crate) fn read_string<B: Buf>(buf: &mut B) -> Result<String, DecodeError> {
    let bytes = read_bytes(buf)?;
    String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::InvalidString)
}

pub(crate) fn write_string<B: BufMut>(
    buf: &mut B,
    value: &str,
    field: &'static str,
) -> Result<(), EncodeError> {
    write_varint(buf, value.len() as u64, field)?;
    buf.put_slice(value.as_bytes());
    Ok(())
}

/// A broadcast path: a string, normalized, with at most [`MAX_PATH_PARTS`] parts.
pub(crate) fn read_path<B: Buf>(buf: &mut B) -> Result<Path, DecodeError> {
    let path = Path::from(read_string(buf)?);
    if parts(&path) > MAX_PATH_PARTS {
        return Err(DecodeError::BoundsExceeded("broadcast path parts"));
    }
    Ok(path)
}

pub(crate) fn write_path<B: BufMut>(
    buf: &mut B,
    path: &Path,
    field: &'static str,
) -> Result<(), EncodeError> {
    if parts(path) > MAX_PATH_PARTS {
        return Err(EncodeError::BoundsExceeded(field));
    }
    write_string(buf, path.as_str(), field)
}

fn parts(path: &Path) -> usize {
    if path.is_root() {
        0
    } else {
        path.as_str().split('/').count()
    }
}

/// An optional group: 0 is none, any other value is the sequence plus one.
pub(crate) fn read_optional_group<B: Buf>(buf: &mut B) -> Result<Option<u64>, DecodeError> {
    Ok(read_varint(buf)?.checked_sub(1))
}

pub(crate) fn write_optional_group<B: BufMut>(
    buf: &mut B,
    group: Option<u64>,
    field: &'static str,
) -> Result<(), EncodeError> {
    let wire = match group {
        None => 0,
        Some(group) => group
            .checked_add(1)
            .ok_or(EncodeError::BoundsExceeded(field))?,
    };
    write_varint(buf, wire, field)
}

/// A duration: a varint count of milliseconds.
pub(crate) fn read_millis<B: Buf>(buf: &mut B) -> Result<Duration, DecodeError> {
    Ok(Duration::from_millis(read_varint(buf)?))
}

pub(crate) fn write_millis<B: BufMut>(
    buf: &mut B,
    duration: Duration,
    field: &'static str,
) -> Result<(), EncodeError> {
    let millis =
        u64::try_from(duration.as_millis()).map_err(|_| EncodeError::BoundsExceeded(field))?;
    write_varint(buf, millis, field)
}
