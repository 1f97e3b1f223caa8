//! Records on a byte stream (TCP, TLS): each is its Size as a varint, then that many bytes
//! of frames (spec: draft-ietf-quic-qmux-02 §3.2). On draft-00 there are no records, and
//! the unit read off the stream is one bare frame. A WebSocket carries one record's
//! frames per message and needs neither.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use moqx_net::coding::varint::{read_varint, write_varint};

use crate::frame::{Frame, FrameError, Lengthless};

/// Why bytes read off the stream are not a record this side takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The peer declared a record larger than this side's `max_record_size`
    /// (FRAME_ENCODING_ERROR, spec: -02 §5.2).
    #[error("a record of {size} bytes is over the {limit}-byte limit")]
    TooLarge {
        /// What the peer declared.
        size: u64,
        /// What this side takes.
        limit: u64,
    },
    /// A draft-00 frame that cannot be delimited, or that is over the limit.
    #[error(transparent)]
    Frame(#[from] FrameError),
}

/// Cuts the bytes read off a stream into records (or draft-00 frames), holding at most one
/// unit's worth: the caller appends what it read, then takes whole units.
#[derive(Debug)]
pub struct RecordReader {
    buffer: BytesMut,
    records: bool,
    limit: u64,
}

impl RecordReader {
    /// A reader of records (`records`, draft-01 and later) or bare frames (draft-00) of at
    /// most `limit` bytes each.
    pub fn new(records: bool, limit: u64) -> Self {
        Self {
            buffer: BytesMut::new(),
            records,
            limit,
        }
    }

    /// Where to append bytes read off the stream (read into its spare capacity, or
    /// `extend_from_slice`).
    pub fn buffer(&mut self) -> &mut BytesMut {
        &mut self.buffer
    }

    /// The next whole record's frames (or draft-00 frame), `None` until all of it is here.
    pub fn next_record(&mut self) -> Result<Option<Bytes>, RecordError> {
        if self.records {
            let mut peek = &self.buffer[..];
            let Ok(size) = read_varint(&mut peek) else {
                return Ok(None);
            };
            if size > self.limit {
                return Err(RecordError::TooLarge {
                    size,
                    limit: self.limit,
                });
            }
            let header = self.buffer.len() - peek.len();
            // `size` is at most `limit`, which fits memory.
            let size = size as usize;
            if peek.len() < size {
                self.buffer.reserve(header + size - self.buffer.len());
                return Ok(None);
            }
            self.buffer.advance(header);
            return Ok(Some(self.buffer.split_to(size).freeze()));
        }
        // Draft-00: find where the frame ends by decoding what is here. The buffer is
        // frozen for the decode and thawed after without a copy (a frame that arrives in
        // many reads is tried once per read: copying it each time would be quadratic);
        // only bytes after a whole frame are copied, once.
        let mut rest = std::mem::take(&mut self.buffer).freeze();
        let before = rest.len();
        let decoded = {
            let mut peek = rest.clone();
            Frame::decode(&mut peek, Lengthless::Refused).map(|_| before - peek.len())
        };
        let frame = decoded.as_ref().ok().map(|len| rest.split_to(*len));
        self.buffer = rest
            .try_into_mut()
            .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
        match decoded {
            Ok(_) => Ok(frame),
            Err(FrameError::Short) if (before as u64) < self.limit => Ok(None),
            Err(FrameError::Short) => Err(RecordError::TooLarge {
                size: before as u64,
                limit: self.limit,
            }),
            Err(error) => Err(error.into()),
        }
    }
}

/// A record as it goes on a byte stream: its Size, then `frames` (draft-01 and later);
/// `frames` alone on draft-00.
pub fn frame_record(frames: &[u8], records: bool, out: &mut BytesMut) {
    if records {
        // A record's length is at most the peer's `max_record_size`, below 2^62.
        let _ = write_varint(out, frames.len() as u64, "record size");
    }
    out.put_slice(frames);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(frames: &[u8]) -> BytesMut {
        let mut out = BytesMut::new();
        frame_record(frames, true, &mut out);
        out
    }

    #[test]
    fn records_come_out_whole_however_the_bytes_arrive() {
        let mut wire = record(b"hello");
        wire.extend_from_slice(&record(&[7u8; 300]));
        let mut reader = RecordReader::new(true, 16_382);
        let mut records = Vec::new();
        for byte in wire {
            reader.buffer().put_u8(byte);
            while let Some(record) = reader.next_record().unwrap() {
                records.push(record);
            }
        }
        assert_eq!(
            records,
            [Bytes::from_static(b"hello"), Bytes::from(vec![7u8; 300])]
        );
    }

    #[test]
    fn a_record_over_the_limit_is_refused_before_it_is_read() {
        let mut reader = RecordReader::new(true, 16_382);
        // Only the Size: 16,383 declared.
        let mut size = BytesMut::new();
        write_varint(&mut size, 16_383, "size").unwrap();
        reader.buffer().extend_from_slice(&size);
        assert_eq!(
            reader.next_record(),
            Err(RecordError::TooLarge {
                size: 16_383,
                limit: 16_382
            })
        );
    }

    #[test]
    fn draft_00_reads_bare_frames() {
        let mut wire = BytesMut::new();
        Frame::MaxData(70_000).encode(&mut wire);
        Frame::Stream {
            id: 2,
            offset: 0,
            data: Bytes::from_static(b"abc"),
            fin: true,
        }
        .encode(&mut wire);
        let mut reader = RecordReader::new(false, 16_384);
        reader.buffer().extend_from_slice(&wire[..3]);
        assert_eq!(reader.next_record(), Ok(None));
        reader.buffer().extend_from_slice(&wire[3..]);
        let first = reader.next_record().unwrap().unwrap();
        assert_eq!(
            Frame::decode(&mut first.clone(), Lengthless::Refused),
            Ok(Frame::MaxData(70_000))
        );
        assert!(reader.next_record().unwrap().is_some());
        assert_eq!(reader.next_record(), Ok(None));
    }

    #[test]
    fn a_draft_00_frame_that_never_ends_is_refused_at_the_limit() {
        let mut reader = RecordReader::new(false, 64);
        // A STREAM frame declaring 1,000 bytes of data.
        let mut wire = BytesMut::from(&[0x0a, 0x00, 0x43, 0xe8][..]);
        wire.extend_from_slice(&[0u8; 100]);
        reader.buffer().extend_from_slice(&wire);
        assert!(matches!(
            reader.next_record(),
            Err(RecordError::TooLarge { .. })
        ));
    }
}
