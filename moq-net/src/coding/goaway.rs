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
    fn encode_body<B: BufMut>(&self, buf: &mut B, _version: Version) -> Result<(), EncodeError> {
        write_string(buf, &self.uri, "GOAWAY uri")
    }

    fn decode_body<B: Buf>(buf: &mut B, _version: Version) -> Result<Self, DecodeError> {
        Ok(Self {
            uri: read_string(buf)?,
        })
    }
}
