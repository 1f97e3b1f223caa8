//! The Group stream (uni `0x00`): a GROUP header, then FRAMEs until FIN (spec: moq-lite-05,
//! "Messages", GROUP and FRAME).
//!
//! A FRAME has no length prefix of its own: `Timestamp Delta (i, zigzag) | Size (i) |
//! Payload`, the delta taken from the previous frame of the group (from 0 for the first), in
//! the track's timescale. FETCH replies carry the same bare FRAMEs. Before -05 there is no
//! delta: a FRAME is `Size (i) | Payload`, and its timestamp is whatever the receiver says
//! (the time it arrived, as deployed peers do).

use bytes::{Buf, BufMut, Bytes};

use super::varint::{read_varint, unzigzag, varint_len, write_varint, zigzag};
use super::{DecodeError, EncodeError, Message, Version};

/// GROUP: the header of a group stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    /// The subscription the group belongs to.
    pub subscribe_id: u64,
    /// The group's sequence within its track.
    pub sequence: u64,
}

/// The part of a FRAME before its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// This frame's timestamp minus the previous frame's (the first frame's is from 0).
    /// Not carried before -05: written nowhere, read as 0.
    pub timestamp_delta: i64,
    /// The payload's length in bytes.
    pub size: u64,
}

impl Message for Group {
    fn encode_body<B: BufMut>(&self, buf: &mut B, _version: Version) -> Result<(), EncodeError> {
        write_varint(buf, self.subscribe_id, "GROUP subscribe id")?;
        write_varint(buf, self.sequence, "GROUP sequence")
    }

    fn decode_body<B: Buf>(buf: &mut B, _version: Version) -> Result<Self, DecodeError> {
        Ok(Self {
            subscribe_id: read_varint(buf)?,
            sequence: read_varint(buf)?,
        })
    }

    /// One header per group (one per message in a chat): written without the scratch buffer
    /// of the default framing.
    fn encode<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError> {
        let len = varint_len(self.subscribe_id) + varint_len(self.sequence);
        write_varint(buf, len as u64, "message length")?;
        self.encode_body(buf, version)
    }
}

impl FrameHeader {
    /// The header of a frame with `timestamp`, after a frame with `previous` (0 for a
    /// group's first frame), carrying `size` payload bytes.
    pub fn new(previous: u64, timestamp: u64, size: u64) -> Self {
        Self {
            timestamp_delta: timestamp.wrapping_sub(previous) as i64,
            size,
        }
    }

    /// The frame's absolute timestamp after a frame with `previous`; a timestamp below zero
    /// is [`DecodeError::BoundsExceeded`].
    pub fn timestamp(&self, previous: u64) -> Result<u64, DecodeError> {
        previous
            .checked_add_signed(self.timestamp_delta)
            .ok_or(DecodeError::BoundsExceeded("frame timestamp"))
    }

    /// Writes the delta and the size; the payload follows.
    pub fn encode<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError> {
        if version.has_frame_timestamps() {
            write_varint(buf, zigzag(self.timestamp_delta), "FRAME timestamp delta")?;
        }
        write_varint(buf, self.size, "FRAME size")
    }

    /// Reads the delta and the size; the caller then reads `size` payload bytes.
    pub fn decode<B: Buf>(buf: &mut B, version: Version) -> Result<Self, DecodeError> {
        Ok(Self {
            timestamp_delta: match version.has_frame_timestamps() {
                true => unzigzag(read_varint(buf)?),
                false => 0,
            },
            size: read_varint(buf)?,
        })
    }
}

/// What a group stream carries, in order: its header, then its frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupItem {
    /// The GROUP header, always first.
    Header(Group),
    /// A whole frame, with its absolute timestamp.
    Frame {
        /// The frame's timestamp in the track's timescale; `None` on a version whose frames
        /// carry none (before -05).
        timestamp: Option<u64>,
        /// The payload.
        payload: bytes::Bytes,
    },
}

/// Frames this large or larger share the stream's receive buffer; smaller ones are copied
/// into an allocation of their own. A frame that shares the buffer keeps its whole
/// allocation alive for as long as the frame lives, and a group holds its frames until it
/// ends: in a group that stays open (a log, written a frame at a time), small frames
/// would each keep alive a receive buffer several times their size, which the memory
/// budget does not see (it counts payload). A large frame fills most of the buffer it
/// arrived in, so sharing it costs little and saves a copy.
const SHARE_FROM: u64 = 16 << 10;

/// Decodes a group stream incrementally: feed it the bytes after the stream type as they
/// arrive ([`push`](Self::push)), take items out ([`next_item`](Self::next_item)), and call
/// [`finish`](Self::finish) at FIN.
///
/// The rules at FIN are deployed peers' (spec: moq-lite-05 vectors, GROUP_STREAM): a stream
/// that ends between frames is a clean end, and so is one that ends right after a frame's
/// timestamp delta (the dangling delta is discarded); ending inside a size varint is a
/// decode error, and inside a payload is [`crate::Error::WrongSize`]. Before -05, frames
/// have no delta: ending after a whole size is ending inside its payload.
///
/// ```
/// use moqx_net::coding::{GroupDecoder, GroupItem, Version};
///
/// // A GROUP header (subscribe id 3, sequence 42), then "hello" at timestamp 1000.
/// let mut decoder = GroupDecoder::new(Version::Lite05, 1 << 20);
/// decoder.push(&[0x02, 0x03, 0x2a, 0x47, 0xd0, 0x05]);
/// assert!(matches!(decoder.next_item(), Ok(Some(GroupItem::Header(_)))));
/// assert_eq!(decoder.next_item(), Ok(None), "the payload has not arrived");
/// decoder.push(b"hello");
/// let Ok(Some(GroupItem::Frame { timestamp, payload })) = decoder.next_item() else {
///     panic!("a frame");
/// };
/// assert_eq!((timestamp, &payload[..]), (Some(1000), &b"hello"[..]));
/// assert_eq!(decoder.finish(), Ok(()));
/// ```
#[derive(Debug)]
pub struct GroupDecoder {
    version: Version,
    max_frame_size: u64,
    buffered: bytes::BytesMut,
    header_read: bool,
    previous_timestamp: u64,
}

impl GroupDecoder {
    /// A decoder that refuses frames larger than `max_frame_size` bytes.
    pub fn new(version: Version, max_frame_size: u64) -> Self {
        Self {
            version,
            max_frame_size,
            buffered: bytes::BytesMut::new(),
            header_read: false,
            previous_timestamp: 0,
        }
    }

    /// Appends bytes received on the stream.
    pub fn push(&mut self, data: &[u8]) {
        self.buffered.extend_from_slice(data);
    }

    /// How many bytes are buffered and not yet decoded.
    pub fn buffered(&self) -> usize {
        self.buffered.len()
    }

    /// The next complete item; `Ok(None)` until more bytes arrive. An error is fatal to the
    /// stream: reset it with the error's code.
    pub fn next_item(&mut self) -> Result<Option<GroupItem>, crate::Error> {
        let mut cursor = &self.buffered[..];
        if !self.header_read {
            return match Group::decode(&mut cursor, self.version) {
                Ok(header) => {
                    let used = self.buffered.len() - cursor.len();
                    self.buffered.advance(used);
                    self.header_read = true;
                    Ok(Some(GroupItem::Header(header)))
                }
                Err(DecodeError::Short) => Ok(None),
                Err(error) => Err(error.into()),
            };
        }
        let header = match FrameHeader::decode(&mut cursor, self.version) {
            Ok(header) => header,
            Err(DecodeError::Short) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        if header.size > self.max_frame_size {
            return Err(crate::Error::FrameTooLarge);
        }
        let timestamp = header.timestamp(self.previous_timestamp)?;
        if (cursor.len() as u64) < header.size {
            return Ok(None);
        }
        let used = self.buffered.len() - cursor.len();
        self.buffered.advance(used);
        let size = header.size as usize;
        let payload = if header.size < SHARE_FROM {
            let payload = Bytes::copy_from_slice(&self.buffered[..size]);
            self.buffered.advance(size);
            payload
        } else {
            self.buffered.split_to(size).freeze()
        };
        self.previous_timestamp = timestamp;
        let timestamp = self.version.has_frame_timestamps().then_some(timestamp);
        Ok(Some(GroupItem::Frame { timestamp, payload }))
    }

    /// The stream ended (FIN): whether it ended cleanly. Call after [`next_item`] returned
    /// `Ok(None)`.
    ///
    /// [`next_item`]: Self::next_item
    pub fn finish(&self) -> Result<(), crate::Error> {
        if self.buffered.is_empty() {
            return if self.header_read {
                Ok(())
            } else {
                Err(crate::Error::Decode)
            };
        }
        if !self.header_read {
            return Err(crate::Error::Decode);
        }
        let mut cursor = &self.buffered[..];
        if self.version.has_frame_timestamps()
            && read_varint(&mut cursor).is_ok()
            && cursor.is_empty()
        {
            // Only a timestamp delta: deployed peers end the group cleanly here.
            return Ok(());
        }
        match FrameHeader::decode(&mut &self.buffered[..], self.version) {
            // A whole header and part of the payload.
            Ok(_) => Err(crate::Error::WrongSize),
            Err(_) => Err(crate::Error::Decode),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a small frame shared the stream's receive buffer, so a group that stays
    /// open kept receive buffers alive several times the size of its frames. Small frames
    /// now own exactly their bytes; a large one may share.
    #[test]
    fn small_frames_own_their_bytes_and_large_ones_may_share_the_buffer() {
        let mut decoder = GroupDecoder::new(Version::Lite05, 1 << 20);
        decoder.push(&[0x02, 0x03, 0x2a]);
        assert!(matches!(
            decoder.next_item(),
            Ok(Some(GroupItem::Header(_)))
        ));
        let frame = |size: usize| {
            let mut bytes = Vec::new();
            write_varint(&mut bytes, 0, "timestamp delta").expect("small");
            write_varint(&mut bytes, size as u64, "size").expect("small");
            bytes.resize(bytes.len() + size, 7);
            bytes
        };
        let mut chunk = frame(64);
        chunk.extend(frame(64));
        chunk.extend(frame(SHARE_FROM as usize));
        decoder.push(&chunk);
        let mut payloads = Vec::new();
        while let Ok(Some(GroupItem::Frame { payload, .. })) = decoder.next_item() {
            payloads.push(payload);
        }
        assert_eq!(payloads.len(), 3);
        assert!(payloads[0].is_unique() && payloads[1].is_unique());
        assert_eq!(payloads[2].len(), SHARE_FROM as usize);
        assert!(payloads.iter().all(|p| p.iter().all(|byte| *byte == 7)));
    }
}
