//! Subscriptions (§ "SUBSCRIBE", "SUBSCRIBE_OK", "UNSUBSCRIBE", "SUBSCRIBE_UPDATE" /
//! "REQUEST_UPDATE"): a subscriber asks for a track, the publisher accepts with the track's
//! alias. TRACK_STATUS and draft 14's TRACK_STATUS_OK share SUBSCRIBE's and SUBSCRIBE_OK's
//! layouts ([`TrackStatus`], [`TrackStatusOk`]).
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

/// The parameters TRACK_STATUS may carry on `draft` (14: those of SUBSCRIBE).
fn track_request_parameters(kind: u64, draft: Draft) -> &'static [Param] {
    match kind {
        0x0d if draft.has_subscription_parameters() => &[Param::AuthorizationToken],
        _ => SUBSCRIBE_PARAMETERS,
    }
}

/// A request about one track, with SUBSCRIBE's layout: SUBSCRIBE (`0x03`) and TRACK_STATUS
/// (`0x0D`), every draft. `TYPE` is its message type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrackRequest<const TYPE: u64> {
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

/// SUBSCRIBE: the sender wants the objects of one track.
pub type Subscribe = TrackRequest<0x03>;
/// TRACK_STATUS: the sender wants to know a track's state (its largest location), without
/// its objects.
pub type TrackStatus = TrackRequest<0x0d>;

impl<const TYPE: u64> Control for TrackRequest<TYPE> {
    const NAME: &'static str = match TYPE {
        0x03 => "SUBSCRIBE",
        _ => "TRACK_STATUS",
    };

    fn message_type(_: Draft) -> Option<u64> {
        Some(TYPE)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.request_id, draft, "request id")?;
        self.namespace.encode(buf, draft)?;
        write_track_name(buf, &self.name, draft, &self.namespace)?;
        let allowed = track_request_parameters(TYPE, draft);
        if draft.has_subscription_parameters() {
            return self.parameters.encode(buf, draft, allowed);
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
        rest.encode(buf, draft, allowed)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_int(buf, draft)?;
        let namespace = Namespace::decode(buf, draft)?;
        let name = read_track_name(buf, draft, &namespace)?;
        let allowed = track_request_parameters(TYPE, draft);
        let parameters = if draft.has_subscription_parameters() {
            MessageParameters::decode(buf, draft, allowed)?
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
                ..MessageParameters::decode(buf, draft, allowed)?
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

/// A reply with SUBSCRIBE_OK's layout: SUBSCRIBE_OK (`0x04`, every draft) and draft 14's
/// TRACK_STATUS_OK (`0x0E`, track alias 0; later drafts answer TRACK_STATUS with
/// REQUEST_OK). `TYPE` is its message type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrackAccepted<const TYPE: u64> {
    /// The request answered (14, 16; on 18 the stream says).
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

/// SUBSCRIBE_OK: the publisher accepts a subscription.
pub type SubscribeOk = TrackAccepted<0x04>;
/// TRACK_STATUS_OK (14): the track's state.
pub type TrackStatusOk = TrackAccepted<0x0e>;

impl<const TYPE: u64> Control for TrackAccepted<TYPE> {
    const NAME: &'static str = match TYPE {
        0x04 => "SUBSCRIBE_OK",
        _ => "TRACK_STATUS_OK",
    };

    fn message_type(draft: Draft) -> Option<u64> {
        (TYPE == 0x04 || draft == Draft::D14).then_some(TYPE)
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

/// The parameters REQUEST_UPDATE may carry (each where its draft defines it).
pub const REQUEST_UPDATE_PARAMETERS: &[Param] = &[
    Param::DeliveryTimeout,
    Param::AuthorizationToken,
    Param::SubgroupDeliveryTimeout,
    Param::Forward,
    Param::SubscriberPriority,
    Param::Filter,
    Param::NewGroupRequest,
    Param::NamespacePrefix,
];

/// REQUEST_UPDATE (`0x02`; SUBSCRIBE_UPDATE on 14): the sender changes a request it made.
///
/// On 14 it updates a subscription, and its range, priority and forward state are fields:
/// here the range is `parameters.filter` (an AbsoluteStart, or an AbsoluteRange), the rest
/// `subscriber_priority` and `forward`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestUpdate {
    /// Its own request id.
    pub request_id: u64,
    /// The request it changes (14, 16; on 18 the stream says).
    pub existing_request_id: Option<u64>,
    /// What changes.
    pub parameters: MessageParameters,
}

impl Control for RequestUpdate {
    const NAME: &'static str = "REQUEST_UPDATE";

    fn message_type(_: Draft) -> Option<u64> {
        Some(0x02)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.request_id, draft, "request id")?;
        write_reply_id(buf, self.existing_request_id, draft)?;
        if draft.has_subscription_parameters() {
            return self
                .parameters
                .encode(buf, draft, REQUEST_UPDATE_PARAMETERS);
        }
        // 14: Start Location, End Group (plus one; 0 open-ended), priority, forward.
        let mut rest = self.parameters.clone();
        let (start, end) = match rest.filter.take() {
            Some(Filter::AbsoluteStart(start)) => (start, 0),
            Some(Filter::AbsoluteRange { start, end_group }) => (
                start,
                end_group
                    .checked_add(1)
                    .ok_or(EncodeError::BoundsExceeded("end group"))?,
            ),
            _ => return Err(EncodeError::InvalidValue("SUBSCRIBE_UPDATE range")),
        };
        start.encode(buf, draft)?;
        write_int(buf, end, draft, "end group")?;
        buf.put_u8(
            rest.subscriber_priority
                .take()
                .unwrap_or(DEFAULT_SUBSCRIBER_PRIORITY),
        );
        buf.put_u8(u8::from(rest.forward.take().unwrap_or(true)));
        rest.encode(buf, draft, REQUEST_UPDATE_PARAMETERS)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_int(buf, draft)?;
        let existing_request_id = read_reply_id(buf, draft)?;
        if draft.has_subscription_parameters() {
            return Ok(Self {
                request_id,
                existing_request_id,
                parameters: MessageParameters::decode(buf, draft, REQUEST_UPDATE_PARAMETERS)?,
            });
        }
        let start = Location::decode(buf, draft)?;
        let filter = match read_int(buf, draft)? {
            0 => Filter::AbsoluteStart(start),
            end if end - 1 < start.group => {
                return Err(DecodeError::InvalidValue("SUBSCRIBE_UPDATE end group"));
            }
            end => Filter::AbsoluteRange {
                start,
                end_group: end - 1,
            },
        };
        let priority = read_u8(buf)?;
        let forward = read_flag(buf, "forward")?;
        Ok(Self {
            request_id,
            existing_request_id,
            parameters: MessageParameters {
                filter: Some(filter),
                subscriber_priority: Some(priority),
                forward: Some(forward),
                ..MessageParameters::decode(buf, draft, REQUEST_UPDATE_PARAMETERS)?
            },
        })
    }
}
