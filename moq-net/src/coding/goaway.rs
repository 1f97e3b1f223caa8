//! The Goaway stream (bidi `0x05`, either side): the sender is shutting down (spec:
//! moq-lite-05, "Messages").

use bytes::{Buf, BufMut};

use super::fields::{read_string, write_string};
use super::{DecodeError, EncodeError, Message, Version};

/// GOAWAY: stop opening streams here; reconnect to `uri` if it is not empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoAway {
    /// Where to reconnect; empty means the same place later.
    pub uri: String,
}

impl Message for GoAway {
    fn encode_body<B: BufMut>(&self, buf: &mut B, version: Version) -> Result<(), EncodeError> {
        if !version.has_goaway() {
            return Err(EncodeError::NotInVersion("GOAWAY"));
        }
        write_string(buf, &self.uri, "GOAWAY uri")
    }

    fn decode_body<B: Buf>(buf: &mut B, version: Version) -> Result<Self, DecodeError> {
        if !version.has_goaway() {
            return Err(DecodeError::NotInVersion("GOAWAY"));
        }
        Ok(Self {
            uri: read_string(buf)?,
        })
    }
}
