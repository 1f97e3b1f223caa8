//! Subscriptions (§ "SUBSCRIBE", "SUBSCRIBE_OK", "UNSUBSCRIBE"): a subscriber asks for a
//! track, the publisher accepts with the track's alias.
//!
//! Draft 14 carries the subscriber's priority, group order, forward state and filter as
//! fields of SUBSCRIBE, and the expiry, group order and largest location as fields of
//! SUBSCRIBE_OK; from 16 they are message parameters. Here they live in
//! [`MessageParameters`] on every draft, and the codec moves them between fields and
//! parameters as the draft asks.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};

use super::Draft;
use super::control::Control;
use super::fields::{Location, Namespace, read_track_name, write_track_name};
use super::filter::{Filter, GroupOrder, read_flag, read_optional_order, read_u8};
use super::int::{read_int, write_int};
use super::message_params::{MessageParameters, Param};
use super::params::Parameters;
use super::reply::{read_properties, read_reply_id, write_properties, write_reply_id};
use crate::coding::{DecodeError, EncodeError};

/// The subscriber priority a subscription without one has (16 on: the parameter's default).
pub const DEFAULT_SUBSCRIBER_PRIORITY: u8 = 128;

/// The parameters SUBSCRIBE may carry (each where its draft defines it).
pub const SUBSCRIBE_PARAMETERS: &[Param] = &[
    Param::DeliveryTimeout,
    Param::AuthorizationToken,
    Param::RendezvousTimeout,
    Param::SubgroupDeliveryTimeout,
    Param::Forward,
    Param::SubscriberPriority,
    Param::Filter,
    Param::GroupOrder,
    Param::NewGroupRequest,
];

/// SUBSCRIBE (`0x03`, every draft): the sender wants the objects of one track.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscribe {
    /// Its request id.
    pub request_id: u64,
    /// The track's namespace.
    pub namespace: Namespace,
    /// The track's name.
    pub name: Bytes,
    /// Its parameters, the subscription's own (priority, group order, forward, filter)
    /// among them on every draft.
    pub parameters: MessageParameters,
}

impl Control for Subscribe {
    const NAME: &'static str = "SUBSCRIBE";

    fn message_type(_: Draft) -> Option<u64> {
        Some(0x03)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.request_id, draft, "request id")?;
        self.namespace.encode(buf, draft)?;
        write_track_name(buf, &self.name, draft, &self.namespace)?;
        if draft.has_subscription_parameters() {
            return self.parameters.encode(buf, draft, SUBSCRIBE_PARAMETERS);
        }
        // 14: the subscription's parameters are fields.
        let mut rest = self.parameters.clone();
        buf.put_u8(
            rest.subscriber_priority
                .take()
                .unwrap_or(DEFAULT_SUBSCRIBER_PRIORITY),
        );
        buf.put_u8(rest.group_order.take().map_or(0, GroupOrder::value));
        buf.put_u8(u8::from(rest.forward.take().unwrap_or(true)));
        // Without a filter every object passes: AbsoluteStart at {0, 0} says that on 14.
        let filter = rest.filter.take();
        filter
            .unwrap_or(Filter::AbsoluteStart(Location::default()))
            .encode(buf, draft)?;
        rest.encode(buf, draft, SUBSCRIBE_PARAMETERS)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_int(buf, draft)?;
        let namespace = Namespace::decode(buf, draft)?;
        let name = read_track_name(buf, draft, &namespace)?;
        let parameters = if draft.has_subscription_parameters() {
            MessageParameters::decode(buf, draft, SUBSCRIBE_PARAMETERS)?
        } else {
            let priority = read_u8(buf)?;
            let group_order = read_optional_order(buf)?;
            let forward = read_flag(buf, "forward")?;
            let filter = Filter::decode(buf, draft)?;
            MessageParameters {
                subscriber_priority: Some(priority),
                group_order,
                forward: Some(forward),
                filter: Some(filter),
                ..MessageParameters::decode(buf, draft, SUBSCRIBE_PARAMETERS)?
            }
        };
        Ok(Self {
            request_id,
            namespace,
            name,
            parameters,
        })
    }
}

/// The parameters SUBSCRIBE_OK may carry on `draft`.
fn subscribe_ok_parameters(draft: Draft) -> &'static [Param] {
    if draft.has_subscription_parameters() {
        &[Param::Expires, Param::LargestObject]
    } else {
        &[Param::DeliveryTimeout, Param::MaxCacheDuration]
    }
}

/// SUBSCRIBE_OK (`0x04`, every draft): the publisher accepts a subscription.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscribeOk {
    /// The SUBSCRIBE answered (14, 16; on 18 the stream says).
    pub request_id: Option<u64>,
    /// The alias the track's data streams and datagrams carry.
    pub track_alias: u64,
    /// The group order the publisher delivers in (14 only, a field there; from 16 a track
    /// property, in `properties`).
    pub group_order: Option<GroupOrder>,
    /// Its parameters: EXPIRES and LARGEST_OBJECT on every draft (fields on 14).
    pub parameters: MessageParameters,
    /// Track extensions (16) or properties (18), as they came.
    pub properties: Parameters,
}

impl Control for SubscribeOk {
    const NAME: &'static str = "SUBSCRIBE_OK";

    fn message_type(_: Draft) -> Option<u64> {
        Some(0x04)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_reply_id(buf, self.request_id, draft)?;
        write_int(buf, self.track_alias, draft, "track alias")?;
        let allowed = subscribe_ok_parameters(draft);
        if draft.has_subscription_parameters() {
            if self.group_order.is_some() {
                return Err(EncodeError::NotInVersion("SUBSCRIBE_OK group order"));
            }
            self.parameters.encode(buf, draft, allowed)?;
            return write_properties(buf, &self.properties, draft, true);
        }
        // 14: expiry, group order and the largest location are fields.
        let mut rest = self.parameters.clone();
        let expires = rest.expires.take().unwrap_or(Duration::ZERO).as_millis();
        let expires = u64::try_from(expires).map_err(|_| EncodeError::BoundsExceeded("expires"))?;
        write_int(buf, expires, draft, "expires")?;
        let order = self
            .group_order
            .ok_or(EncodeError::InvalidValue("SUBSCRIBE_OK group order"))?;
        buf.put_u8(order.value());
        match rest.largest_object.take() {
            Some(largest) => {
                buf.put_u8(1);
                largest.encode(buf, draft)?;
            }
            None => buf.put_u8(0),
        }
        rest.encode(buf, draft, allowed)?;
        write_properties(buf, &self.properties, draft, false)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_reply_id(buf, draft)?;
        let track_alias = read_int(buf, draft)?;
        let allowed = subscribe_ok_parameters(draft);
        if draft.has_subscription_parameters() {
            return Ok(Self {
                request_id,
                track_alias,
                group_order: None,
                parameters: MessageParameters::decode(buf, draft, allowed)?,
                properties: read_properties(buf, draft, true)?,
            });
        }
        // Expires 0: the subscription does not expire.
        let expires = read_int(buf, draft)?;
        let group_order = GroupOrder::from_value(u64::from(read_u8(buf)?))?;
        let largest = if read_flag(buf, "content exists")? {
            Some(Location::decode(buf, draft)?)
        } else {
            None
        };
        Ok(Self {
            request_id,
            track_alias,
            group_order: Some(group_order),
            parameters: MessageParameters {
                expires: (expires != 0).then(|| Duration::from_millis(expires)),
                largest_object: largest,
                ..MessageParameters::decode(buf, draft, allowed)?
            },
            properties: Parameters::default(),
        })
    }
}

/// UNSUBSCRIBE (`0x0A`, 14 and 16): the subscriber ends a subscription (18 resets the
/// request's stream instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsubscribe {
    /// The SUBSCRIBE it ends.
    pub request_id: u64,
}

impl Control for Unsubscribe {
    const NAME: &'static str = "UNSUBSCRIBE";

    fn message_type(draft: Draft) -> Option<u64> {
        (!draft.has_request_streams()).then_some(0x0a)
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
