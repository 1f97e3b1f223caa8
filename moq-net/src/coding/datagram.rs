//! DATAGRAM: a one-frame group in a QUIC datagram (spec: moq-lite-05, "Messages"). No length
//! and no type: the datagram's end ends the payload.

use bytes::{Buf, BufMut, Bytes};

use super::varint::{read_varint, write_varint};
use super::{DecodeError, EncodeError, Version};

/// A datagram's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// The subscription it belongs to.
    pub subscribe_id: u64,
    /// The group's sequence.
    pub sequence: u64,
    /// The frame's absolute timestamp.
    pub timestamp: u64,
    /// The rest of the datagram.
    pub payload: Bytes,
}

impl Datagram {
    /// Writes the datagram body.
    pub fn encode<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError> {
        if !version.has_datagrams() {
            return Err(EncodeError::NotInVersion("DATAGRAM"));
        }
        write_varint(buf, self.subscribe_id, "DATAGRAM subscribe id")?;
        write_varint(buf, self.sequence, "DATAGRAM sequence")?;
        write_varint(buf, self.timestamp, "DATAGRAM timestamp")?;
        buf.put_slice(&self.payload);
        Ok(())
    }

    /// Reads a whole datagram; the payload is what follows the three varints (without a
    /// copy when `buf` is `Bytes`).
    pub fn decode<B: Buf>(buf: &mut B, version: Version) -> Result<Self, DecodeError> {
        if !version.has_datagrams() {
            return Err(DecodeError::NotInVersion("DATAGRAM"));
        }
        let subscribe_id = read_varint(buf)?;
        let sequence = read_varint(buf)?;
        let timestamp = read_varint(buf)?;
        let payload = buf.copy_to_bytes(buf.remaining());
        Ok(Self {
            subscribe_id,
            sequence,
            timestamp,
            payload,
        })
    }
}
