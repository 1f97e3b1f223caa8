//! The Probe stream (bidi `0x04`, publisher to subscriber): bandwidth and RTT reports (spec:
//! moq-lite-05, "Messages").

use std::time::Duration;

use bytes::{Buf, BufMut};

use super::fields::{read_millis, write_millis};
use super::varint::{read_varint, write_varint};
use super::{DecodeError, EncodeError, Message, Version};

/// PROBE: what the publisher measures of the path to the subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// Estimated bitrate in bits per second; 0 is unknown.
    pub bitrate: u64,
    /// Round-trip time; zero is unknown. Not carried by -03 (written nowhere, read as zero).
    pub rtt: Duration,
}

impl Message for Probe {
    fn encode_body<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError> {
        write_varint(buf, self.bitrate, "PROBE bitrate")?;
        if version.has_probe_rtt() {
            write_millis(buf, self.rtt, "PROBE rtt")?;
        }
        Ok(())
    }

    fn decode_body<B: Buf>(buf: &mut B, version: Version) -> Result<Self, DecodeError> {
        Ok(Self {
            bitrate: read_varint(buf)?,
            rtt: match version.has_probe_rtt() {
                true => read_millis(buf)?,
                false => Duration::ZERO,
            },
        })
    }
}
