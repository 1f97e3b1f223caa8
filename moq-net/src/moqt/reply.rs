//! How a request is answered: REQUEST_OK and REQUEST_ERROR (16 on, § "REQUEST_OK",
//! "REQUEST_ERROR"), and draft 14's replies of one layout per request type
//! ([`Accepted`], [`Refused`]).

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};

use super::control::Control;
use super::fields::{
    Namespace, read_bytes, read_reason, read_track_name, write_bytes, write_reason,
    write_track_name,
};
use super::int::{read_int, write_int};
use super::message_params::{MessageParameters, Param};
use super::params::Parameters;
use super::{Draft, MAX_GOAWAY_URI_BYTES};
use crate::coding::{DecodeError, EncodeError};

/// REQUEST_ERROR's code that carries a [`Redirect`] (18).
pub const REDIRECT: u64 = 0x34;

/// The parameters REQUEST_OK may carry on `draft`. On 16 it answers REQUEST_UPDATE,
/// TRACK_STATUS, SUBSCRIBE_NAMESPACE and PUBLISH_NAMESPACE; on 18 also PUBLISH (as
/// PUBLISH_OK), so the list is that of every reply it stands for. Which of them fit the
/// request answered is the session's to check: the codec reads a REQUEST_OK without
/// knowing the request.
pub fn request_ok_parameters(draft: Draft) -> &'static [Param] {
    if draft.has_request_streams() {
        &[
            Param::DeliveryTimeout,
            Param::SubgroupDeliveryTimeout,
            Param::Expires,
            Param::LargestObject,
            Param::Forward,
            Param::SubscriberPriority,
            Param::Filter,
            Param::GroupOrder,
            Param::NewGroupRequest,
        ]
    } else {
        &[Param::Expires, Param::LargestObject]
    }
}

/// REQUEST_OK (`0x07`, 16 on): the request succeeded. It answers REQUEST_UPDATE,
/// TRACK_STATUS, SUBSCRIBE_NAMESPACE and PUBLISH_NAMESPACE (and PUBLISH on 18).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestOk {
    /// The request answered (16; on 18 the stream says).
    pub request_id: Option<u64>,
    /// Its parameters.
    pub parameters: MessageParameters,
    /// Track properties, as they came (18: TRACK_STATUS's answer only).
    pub properties: Parameters,
}

impl Control for RequestOk {
    const NAME: &'static str = "REQUEST_OK";

    fn message_type(draft: Draft) -> Option<u64> {
        (draft >= Draft::D16).then_some(0x07)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_reply_id(buf, self.request_id, draft)?;
        self.parameters
            .encode(buf, draft, request_ok_parameters(draft))?;
        write_properties(buf, &self.properties, draft, draft.has_reply_properties())
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Ok(Self {
            request_id: read_reply_id(buf, draft)?,
            parameters: MessageParameters::decode(buf, draft, request_ok_parameters(draft))?,
            properties: read_properties(buf, draft, draft.has_reply_properties())?,
        })
    }
}

/// Where to make a refused request again (18, REQUEST_ERROR with code [`REDIRECT`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redirect {
    /// The URI to connect to; empty: this session's.
    pub uri: String,
    /// The namespace to ask for; with an empty `name`, empty means the same as before.
    pub namespace: Namespace,
    /// The track name to ask for (empty for a namespace request).
    pub name: Bytes,
}

impl Redirect {
    fn encode<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        if self.uri.len() > MAX_GOAWAY_URI_BYTES {
            return Err(EncodeError::BoundsExceeded("redirect URI"));
        }
        write_bytes(buf, self.uri.as_bytes(), draft)?;
        self.namespace.encode(buf, draft)?;
        write_track_name(buf, &self.name, draft, &self.namespace)
    }

    fn decode<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let uri = read_bytes(buf, draft, MAX_GOAWAY_URI_BYTES, "redirect URI")?;
        let uri = String::from_utf8(uri.to_vec()).map_err(|_| DecodeError::InvalidString)?;
        let namespace = Namespace::decode(buf, draft)?;
        let name = read_track_name(buf, draft, &namespace)?;
        Ok(Self {
            uri,
            namespace,
            name,
        })
    }
}

/// REQUEST_ERROR (`0x05`, 16 on): the request failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestError {
    /// The request answered (16; on 18 the stream says).
    pub request_id: Option<u64>,
    /// Why (§ "REQUEST_ERROR" codes; an unknown one reads as INTERNAL_ERROR).
    pub code: u64,
    /// How long to wait before asking again; `None`: do not ask again. On the wire, the
    /// milliseconds plus one, `0` for never.
    pub retry_after: Option<Duration>,
    /// Why, in words.
    pub reason: String,
    /// Where to ask instead (18, code [`REDIRECT`] only).
    pub redirect: Option<Redirect>,
}

impl Control for RequestError {
    const NAME: &'static str = "REQUEST_ERROR";

    fn message_type(draft: Draft) -> Option<u64> {
        (draft >= Draft::D16).then_some(0x05)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_reply_id(buf, self.request_id, draft)?;
        write_int(buf, self.code, draft, "error code")?;
        let retry = match self.retry_after {
            None => 0,
            Some(after) => u64::try_from(after.as_millis())
                .ok()
                .and_then(|millis| millis.checked_add(1))
                .ok_or(EncodeError::BoundsExceeded("retry interval"))?,
        };
        write_int(buf, retry, draft, "retry interval")?;
        write_reason(buf, &self.reason, draft)?;
        match (
            &self.redirect,
            self.code == REDIRECT && draft.has_redirect(),
        ) {
            (Some(redirect), true) => redirect.encode(buf, draft),
            (None, false) => Ok(()),
            _ => Err(EncodeError::InvalidValue("redirect")),
        }
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_reply_id(buf, draft)?;
        let code = read_int(buf, draft)?;
        let retry = read_int(buf, draft)?;
        let reason = read_reason(buf, draft)?;
        let redirect = if code == REDIRECT && draft.has_redirect() {
            Some(Redirect::decode(buf, draft)?)
        } else {
            None
        };
        Ok(Self {
            request_id,
            code,
            retry_after: retry.checked_sub(1).map(Duration::from_millis),
            reason,
            redirect,
        })
    }
}

/// A draft 14 reply that accepts a request and says nothing else: PUBLISH_NAMESPACE_OK
/// (`0x07`) and SUBSCRIBE_NAMESPACE_OK (`0x12`); `TYPE` is its message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted<const TYPE: u64> {
    /// The request answered.
    pub request_id: u64,
}

/// PUBLISH_NAMESPACE_OK (14).
pub type PublishNamespaceOk = Accepted<0x07>;
/// SUBSCRIBE_NAMESPACE_OK (14).
pub type SubscribeNamespaceOk = Accepted<0x12>;

impl<const TYPE: u64> Control for Accepted<TYPE> {
    const NAME: &'static str = match TYPE {
        0x07 => "PUBLISH_NAMESPACE_OK",
        _ => "SUBSCRIBE_NAMESPACE_OK",
    };

    fn message_type(draft: Draft) -> Option<u64> {
        (draft == Draft::D14).then_some(TYPE)
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

/// A draft 14 reply that refuses a request: `Request ID`, `Error Code`, `Error Reason`, one
/// message type per request type; `TYPE` is its message type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refused<const TYPE: u64> {
    /// The request answered.
    pub request_id: u64,
    /// Why (§ the request type's error codes).
    pub code: u64,
    /// Why, in words.
    pub reason: String,
}

/// SUBSCRIBE_ERROR (14).
pub type SubscribeError = Refused<0x05>;
/// PUBLISH_NAMESPACE_ERROR (14).
pub type PublishNamespaceError = Refused<0x08>;
/// TRACK_STATUS_ERROR (14).
pub type TrackStatusError = Refused<0x0f>;
/// SUBSCRIBE_NAMESPACE_ERROR (14).
pub type SubscribeNamespaceError = Refused<0x13>;
/// FETCH_ERROR (14).
pub type FetchError = Refused<0x19>;
/// PUBLISH_ERROR (14).
pub type PublishError = Refused<0x1f>;

impl<const TYPE: u64> Control for Refused<TYPE> {
    const NAME: &'static str = match TYPE {
        0x05 => "SUBSCRIBE_ERROR",
        0x08 => "PUBLISH_NAMESPACE_ERROR",
        0x0f => "TRACK_STATUS_ERROR",
        0x13 => "SUBSCRIBE_NAMESPACE_ERROR",
        0x19 => "FETCH_ERROR",
        _ => "PUBLISH_ERROR",
    };

    fn message_type(draft: Draft) -> Option<u64> {
        (draft == Draft::D14).then_some(TYPE)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.request_id, draft, "request id")?;
        write_int(buf, self.code, draft, "error code")?;
        write_reason(buf, &self.reason, draft)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Ok(Self {
            request_id: read_int(buf, draft)?,
            code: read_int(buf, draft)?,
            reason: read_reason(buf, draft)?,
        })
    }
}

/// Writes a reply's request id where the draft has one (14, 16), refusing a mismatch.
pub(crate) fn write_reply_id<B: BufMut>(
    buf: &mut B,
    id: Option<u64>,
    draft: Draft,
) -> Result<(), EncodeError> {
    match (draft.has_reply_request_ids(), id) {
        (true, Some(id)) => write_int(buf, id, draft, "request id"),
        (true, None) => Err(EncodeError::InvalidValue("request id")),
        (false, Some(_)) => Err(EncodeError::NotInVersion("a reply's request id")),
        (false, None) => Ok(()),
    }
}

pub(crate) fn read_reply_id<B: Buf>(buf: &mut B, draft: Draft) -> Result<Option<u64>, DecodeError> {
    draft
        .has_reply_request_ids()
        .then(|| read_int(buf, draft))
        .transpose()
}

/// Writes track properties, Key-Value-Pairs to the end of the message, where the message
/// has them (`present`); elsewhere only an empty list is accepted.
pub(crate) fn write_properties<B: BufMut>(
    buf: &mut B,
    properties: &Parameters,
    draft: Draft,
    present: bool,
) -> Result<(), EncodeError> {
    if present {
        properties.encode(buf, draft)
    } else if properties.0.is_empty() {
        Ok(())
    } else {
        Err(EncodeError::NotInVersion("track properties"))
    }
}

/// Reads track properties to the end of the message, where the message has them.
pub(crate) fn read_properties<B: Buf>(
    buf: &mut B,
    draft: Draft,
    present: bool,
) -> Result<Parameters, DecodeError> {
    if present {
        Parameters::decode_to_end(buf, draft)
    } else {
        Ok(Parameters::default())
    }
}
