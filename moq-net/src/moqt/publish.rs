//! Publisher-initiated subscriptions (§ "PUBLISH", "PUBLISH_OK", "PUBLISH_DONE"): a
//! publisher offers a track, the subscriber accepts with its preferences, and the
//! publisher says when it stopped.
//!
//! As in [`super::Subscribe`], draft 14's fields (group order, largest location, forward;
//! PUBLISH_OK's forward, priority, order and filter) live in [`MessageParameters`] here on
//! every draft. On 18 PUBLISH_OK is a REQUEST_OK ([`super::RequestOk`]).

use bytes::{Buf, BufMut, Bytes};

use super::Draft;
use super::control::Control;
use super::fields::{
    Location, Namespace, read_reason, read_track_name, write_reason, write_track_name,
};
use super::filter::{Filter, GroupOrder, read_flag, read_u8};
use super::int::{read_int, write_int};
use super::message_params::{MessageParameters, Param};
use super::params::Parameters;
use super::reply::{read_properties, read_reply_id, write_properties, write_reply_id};
use super::subscribe::DEFAULT_SUBSCRIBER_PRIORITY;
use crate::coding::{DecodeError, EncodeError};

/// PUBLISH_DONE's Stream Count when the publisher cannot say (14, 16: 2^62 − 1).
pub const UNKNOWN_STREAM_COUNT: u64 = (1 << 62) - 1;

/// The parameters PUBLISH may carry on `draft`.
pub fn publish_parameters(draft: Draft) -> &'static [Param] {
    if draft.has_subscription_parameters() {
        &[
            Param::AuthorizationToken,
            Param::Expires,
            Param::LargestObject,
            Param::Forward,
        ]
    } else {
        &[
            Param::DeliveryTimeout,
            Param::AuthorizationToken,
            Param::MaxCacheDuration,
        ]
    }
}

/// The parameters PUBLISH_OK may carry (14, 16).
pub const PUBLISH_OK_PARAMETERS: &[Param] = &[
    Param::DeliveryTimeout,
    Param::Expires,
    Param::Forward,
    Param::SubscriberPriority,
    Param::Filter,
    Param::GroupOrder,
    Param::NewGroupRequest,
];

/// PUBLISH (`0x1D`, every draft): the publisher offers a track, with its alias.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Publish {
    /// Its request id.
    pub request_id: u64,
    /// The track's namespace.
    pub namespace: Namespace,
    /// The track's name.
    pub name: Bytes,
    /// The alias the track's data streams and datagrams will carry.
    pub track_alias: u64,
    /// The order the publisher delivers groups in (14 only, a field there; from 16 a track
    /// property, in `properties`).
    pub group_order: Option<GroupOrder>,
    /// Its parameters: LARGEST_OBJECT and FORWARD on every draft (fields on 14).
    pub parameters: MessageParameters,
    /// Track extensions (16) or properties (18), as they came.
    pub properties: Parameters,
}

impl Control for Publish {
    const NAME: &'static str = "PUBLISH";

    fn message_type(_: Draft) -> Option<u64> {
        Some(0x1d)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.request_id, draft, "request id")?;
        self.namespace.encode(buf, draft)?;
        write_track_name(buf, &self.name, draft, &self.namespace)?;
        write_int(buf, self.track_alias, draft, "track alias")?;
        if draft.has_subscription_parameters() {
            if self.group_order.is_some() {
                return Err(EncodeError::NotInVersion("PUBLISH group order"));
            }
            self.parameters
                .encode(buf, draft, publish_parameters(draft))?;
            return write_properties(buf, &self.properties, draft, true);
        }
        let mut rest = self.parameters.clone();
        let order = self
            .group_order
            .ok_or(EncodeError::InvalidValue("PUBLISH group order"))?;
        buf.put_u8(order.value());
        match rest.largest_object.take() {
            Some(largest) => {
                buf.put_u8(1);
                largest.encode(buf, draft)?;
            }
            None => buf.put_u8(0),
        }
        buf.put_u8(u8::from(rest.forward.take().unwrap_or(true)));
        rest.encode(buf, draft, publish_parameters(draft))?;
        write_properties(buf, &self.properties, draft, false)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_int(buf, draft)?;
        let namespace = Namespace::decode(buf, draft)?;
        let name = read_track_name(buf, draft, &namespace)?;
        let track_alias = read_int(buf, draft)?;
        if draft.has_subscription_parameters() {
            return Ok(Self {
                request_id,
                namespace,
                name,
                track_alias,
                group_order: None,
                parameters: MessageParameters::decode(buf, draft, publish_parameters(draft))?,
                properties: read_properties(buf, draft, true)?,
            });
        }
        let group_order = GroupOrder::from_value(u64::from(read_u8(buf)?))?;
        let largest = if read_flag(buf, "content exists")? {
            Some(Location::decode(buf, draft)?)
        } else {
            None
        };
        let forward = read_flag(buf, "forward")?;
        Ok(Self {
            request_id,
            namespace,
            name,
            track_alias,
            group_order: Some(group_order),
            parameters: MessageParameters {
                largest_object: largest,
                forward: Some(forward),
                ..MessageParameters::decode(buf, draft, publish_parameters(draft))?
            },
            properties: Parameters::default(),
        })
    }
}

/// PUBLISH_OK (`0x1E`, 14 and 16): the subscriber accepts a PUBLISH, with its forward
/// state, priority, group order and filter (fields on 14, where the group order must be
/// given; parameters on 16). On 18 it is a REQUEST_OK.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishOk {
    /// The PUBLISH answered.
    pub request_id: u64,
    /// Its parameters.
    pub parameters: MessageParameters,
}

impl Control for PublishOk {
    const NAME: &'static str = "PUBLISH_OK";

    fn message_type(draft: Draft) -> Option<u64> {
        (!draft.has_request_streams()).then_some(0x1e)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.request_id, draft, "request id")?;
        if draft.has_subscription_parameters() {
            return self.parameters.encode(buf, draft, PUBLISH_OK_PARAMETERS);
        }
        let mut rest = self.parameters.clone();
        buf.put_u8(u8::from(rest.forward.take().unwrap_or(true)));
        buf.put_u8(
            rest.subscriber_priority
                .take()
                .unwrap_or(DEFAULT_SUBSCRIBER_PRIORITY),
        );
        // 14's PUBLISH_OK has no "the publisher's order": 0 is a protocol error there.
        let order = rest
            .group_order
            .take()
            .ok_or(EncodeError::InvalidValue("PUBLISH_OK group order"))?;
        buf.put_u8(order.value());
        rest.filter
            .take()
            .unwrap_or(Filter::AbsoluteStart(Location::default()))
            .encode(buf, draft)?;
        rest.encode(buf, draft, PUBLISH_OK_PARAMETERS)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_int(buf, draft)?;
        if draft.has_subscription_parameters() {
            return Ok(Self {
                request_id,
                parameters: MessageParameters::decode(buf, draft, PUBLISH_OK_PARAMETERS)?,
            });
        }
        let forward = read_flag(buf, "forward")?;
        let priority = read_u8(buf)?;
        let group_order = GroupOrder::from_value(u64::from(read_u8(buf)?))?;
        let filter = Filter::decode(buf, draft)?;
        Ok(Self {
            request_id,
            parameters: MessageParameters {
                forward: Some(forward),
                subscriber_priority: Some(priority),
                group_order: Some(group_order),
                filter: Some(filter),
                ..MessageParameters::decode(buf, draft, PUBLISH_OK_PARAMETERS)?
            },
        })
    }
}

/// PUBLISH_DONE (`0x0B`, every draft): the publisher stopped publishing to a subscription.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishDone {
    /// The subscription (14, 16; on 18 the stream says).
    pub request_id: Option<u64>,
    /// Why (§ "PUBLISH_DONE" codes; they differ between drafts).
    pub status: u64,
    /// How many data streams the publisher opened for the subscription
    /// ([`UNKNOWN_STREAM_COUNT`] if it cannot say).
    pub stream_count: u64,
    /// Why, in words.
    pub reason: String,
}

impl Control for PublishDone {
    const NAME: &'static str = "PUBLISH_DONE";

    fn message_type(_: Draft) -> Option<u64> {
        Some(0x0b)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_reply_id(buf, self.request_id, draft)?;
        write_int(buf, self.status, draft, "status code")?;
        write_int(buf, self.stream_count, draft, "stream count")?;
        write_reason(buf, &self.reason, draft)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Ok(Self {
            request_id: read_reply_id(buf, draft)?,
            status: read_int(buf, draft)?,
            stream_count: read_int(buf, draft)?,
            reason: read_reason(buf, draft)?,
        })
    }
}
