//! GOAWAY (`0x10`, every draft): the sender will close the session soon; a server may name
//! where to go instead (§ "GOAWAY").

use std::time::Duration;

use bytes::{Buf, BufMut};

use super::Draft;
use super::control::Control;
use super::fields::{read_bytes, write_bytes};
use super::int::{read_int, write_int};
use crate::coding::{DecodeError, EncodeError};

/// The longest New Session URI (every draft).
pub const MAX_GOAWAY_URI_BYTES: usize = 8192;

/// GOAWAY.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoAway {
    /// Where the client continues (empty: the current URI). A server that receives a
    /// non-empty one closes the session (a session rule, not the codec's).
    pub uri: String,
    /// How long the sender waits for graceful closure before it closes the session (on the
    /// control stream) or resets the request (on a request stream); zero: no set time
    /// (18 only, whole milliseconds on the wire).
    pub timeout: Option<Duration>,
    /// On the control stream: the smallest of the receiver's request ids the sender did
    /// not or might not have processed (18 only; absent on a request stream, so whether it
    /// is there is read from the payload's length).
    pub request_id: Option<u64>,
}

impl Control for GoAway {
    const NAME: &'static str = "GOAWAY";

    fn message_type(_: Draft) -> Option<u64> {
        Some(0x10)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        if self.uri.len() > MAX_GOAWAY_URI_BYTES {
            return Err(EncodeError::BoundsExceeded("GOAWAY URI"));
        }
        write_bytes(buf, self.uri.as_bytes(), draft)?;
        if !draft.has_goaway_timeout() {
            if self.timeout.is_some() || self.request_id.is_some() {
                return Err(EncodeError::NotInVersion("GOAWAY timeout and request id"));
            }
            return Ok(());
        }
        let millis = self.timeout.unwrap_or_default().as_millis();
        let millis = u64::try_from(millis).map_err(|_| EncodeError::BoundsExceeded("timeout"))?;
        write_int(buf, millis, draft, "timeout")?;
        if let Some(id) = self.request_id {
            write_int(buf, id, draft, "request id")?;
        }
        Ok(())
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let uri = read_bytes(buf, draft, MAX_GOAWAY_URI_BYTES, "GOAWAY URI")?;
        let uri = String::from_utf8(uri.to_vec()).map_err(|_| DecodeError::InvalidString)?;
        if !draft.has_goaway_timeout() {
            return Ok(Self {
                uri,
                ..Self::default()
            });
        }
        let timeout = Some(Duration::from_millis(read_int(buf, draft)?));
        let request_id = if buf.has_remaining() {
            Some(read_int(buf, draft)?)
        } else {
            None
        };
        Ok(Self {
            uri,
            timeout,
            request_id,
        })
    }
}

/// MAX_REQUEST_ID (`0x15`, 14 and 16): the peer may use request ids below this value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxRequestId {
    /// One more than the largest request id the peer may use; only ever grows.
    pub request_id: u64,
}

impl Control for MaxRequestId {
    const NAME: &'static str = "MAX_REQUEST_ID";

    fn message_type(draft: Draft) -> Option<u64> {
        draft.has_request_id_flow_control().then_some(0x15)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.request_id, draft, "request id")
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Ok(Self {
            request_id: read_int(buf, draft)?,
        })
    }
}

/// REQUESTS_BLOCKED (`0x1A`, 14 and 16): the sender has a request to make but the peer's
/// MAX_REQUEST_ID does not allow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestsBlocked {
    /// The peer's MAX_REQUEST_ID the sender is blocked at.
    pub maximum: u64,
}

impl Control for RequestsBlocked {
    const NAME: &'static str = "REQUESTS_BLOCKED";

    fn message_type(draft: Draft) -> Option<u64> {
        draft.has_request_id_flow_control().then_some(0x1a)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.maximum, draft, "maximum request id")
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Ok(Self {
            maximum: read_int(buf, draft)?,
        })
    }
}
