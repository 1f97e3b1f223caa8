//! Message parameters: the optional fields of requests and replies (§ "Parameters" on 14,
//! "Message Parameters" from 16), typed.
//!
//! On 14 and 16 they are Key-Value-Pairs ([`Parameters`]); 14 ignores types it does not
//! know, 16 closes the session on them. On 18 each type has its own encoding (one byte, an
//! integer, a location, length-prefixed bytes or a namespace) and an unknown type cannot be
//! skipped, so it closes the session; so does a known one in a message it is not defined
//! for, which the drafts before ignore. Each message passes the parameters it allows.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};

use super::Draft;
use super::fields::{Location, Namespace, read_bytes, write_bytes};
use super::filter::{Filter, GroupOrder, read_flag, read_u8};
use super::int::{read_int, write_int};
use super::params::{MAX_PARAMETERS, MAX_VALUE_BYTES, Parameter, Parameters, Value};
use crate::coding::{DecodeError, EncodeError};

/// A message parameter this codec knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Param {
    /// DELIVERY TIMEOUT (14, 16) / OBJECT_DELIVERY_TIMEOUT (18), `0x02`.
    DeliveryTimeout,
    /// AUTHORIZATION TOKEN, `0x03`, repeatable.
    AuthorizationToken,
    /// MAX CACHE DURATION, `0x04` (14; a track extension from 16).
    MaxCacheDuration,
    /// RENDEZVOUS_TIMEOUT, `0x04` (18).
    RendezvousTimeout,
    /// SUBGROUP_DELIVERY_TIMEOUT, `0x06` (18).
    SubgroupDeliveryTimeout,
    /// EXPIRES, `0x08` (16 on; a SUBSCRIBE_OK field on 14).
    Expires,
    /// LARGEST_OBJECT, `0x09` (16 on).
    LargestObject,
    /// FILL_TIMEOUT, `0x0A` (18).
    FillTimeout,
    /// FORWARD, `0x10` (16 on).
    Forward,
    /// SUBSCRIBER_PRIORITY, `0x20` (16 on).
    SubscriberPriority,
    /// SUBSCRIPTION_FILTER, `0x21` (16 on).
    Filter,
    /// GROUP_ORDER, `0x22` (16 on).
    GroupOrder,
    /// NEW_GROUP_REQUEST, `0x32` (16 on).
    NewGroupRequest,
    /// TRACK_NAMESPACE_PREFIX, `0x34` (18).
    NamespacePrefix,
}

impl Param {
    const ALL: [Param; 14] = [
        Param::DeliveryTimeout,
        Param::AuthorizationToken,
        Param::MaxCacheDuration,
        Param::RendezvousTimeout,
        Param::SubgroupDeliveryTimeout,
        Param::Expires,
        Param::LargestObject,
        Param::FillTimeout,
        Param::Forward,
        Param::SubscriberPriority,
        Param::Filter,
        Param::GroupOrder,
        Param::NewGroupRequest,
        Param::NamespacePrefix,
    ];

    /// Its type on `draft`, or `None` where the draft does not define it.
    pub fn kind(self, draft: Draft) -> Option<u64> {
        let since_16 = draft >= Draft::D16;
        let on_18 = draft >= Draft::D18;
        let (kind, defined) = match self {
            Param::DeliveryTimeout => (0x02, true),
            Param::AuthorizationToken => (0x03, true),
            Param::MaxCacheDuration => (0x04, draft == Draft::D14),
            Param::RendezvousTimeout => (0x04, on_18),
            Param::SubgroupDeliveryTimeout => (0x06, on_18),
            Param::Expires => (0x08, since_16),
            Param::LargestObject => (0x09, since_16),
            Param::FillTimeout => (0x0a, on_18),
            Param::Forward => (0x10, since_16),
            Param::SubscriberPriority => (0x20, since_16),
            Param::Filter => (0x21, since_16),
            Param::GroupOrder => (0x22, since_16),
            Param::NewGroupRequest => (0x32, since_16),
            Param::NamespacePrefix => (0x34, on_18),
        };
        defined.then_some(kind)
    }

    /// The parameter `kind` names on `draft`.
    pub fn from_kind(kind: u64, draft: Draft) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|param| param.kind(draft) == Some(kind))
    }

    /// Its name in the drafts, for errors.
    pub fn name(self) -> &'static str {
        match self {
            Param::DeliveryTimeout => "DELIVERY_TIMEOUT",
            Param::AuthorizationToken => "AUTHORIZATION_TOKEN",
            Param::MaxCacheDuration => "MAX_CACHE_DURATION",
            Param::RendezvousTimeout => "RENDEZVOUS_TIMEOUT",
            Param::SubgroupDeliveryTimeout => "SUBGROUP_DELIVERY_TIMEOUT",
            Param::Expires => "EXPIRES",
            Param::LargestObject => "LARGEST_OBJECT",
            Param::FillTimeout => "FILL_TIMEOUT",
            Param::Forward => "FORWARD",
            Param::SubscriberPriority => "SUBSCRIBER_PRIORITY",
            Param::Filter => "SUBSCRIPTION_FILTER",
            Param::GroupOrder => "GROUP_ORDER",
            Param::NewGroupRequest => "NEW_GROUP_REQUEST",
            Param::NamespacePrefix => "TRACK_NAMESPACE_PREFIX",
        }
    }
}

/// One parameter's value, before it is put in the draft's encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Millis(Duration),
    Int(u64),
    Byte(u8),
    Flag(bool),
    Bytes(Bytes),
    Location(Location),
    Filter(Filter),
    Order(GroupOrder),
    Namespace(Namespace),
}

/// The message parameters of one message, typed; `None` and empty are "absent".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageParameters {
    /// DELIVERY_TIMEOUT / OBJECT_DELIVERY_TIMEOUT (whole milliseconds on the wire).
    pub delivery_timeout: Option<Duration>,
    /// AUTHORIZATION TOKEN values, each as it came (read by whoever authorizes).
    pub authorization_tokens: Vec<Bytes>,
    /// MAX CACHE DURATION (14).
    pub max_cache_duration: Option<Duration>,
    /// RENDEZVOUS_TIMEOUT (18).
    pub rendezvous_timeout: Option<Duration>,
    /// SUBGROUP_DELIVERY_TIMEOUT (18).
    pub subgroup_delivery_timeout: Option<Duration>,
    /// EXPIRES (16 on).
    pub expires: Option<Duration>,
    /// LARGEST_OBJECT (16 on).
    pub largest_object: Option<Location>,
    /// FILL_TIMEOUT (18).
    pub fill_timeout: Option<Duration>,
    /// FORWARD (16 on): whether objects are forwarded (default: yes).
    pub forward: Option<bool>,
    /// SUBSCRIBER_PRIORITY (16 on; default 128).
    pub subscriber_priority: Option<u8>,
    /// SUBSCRIPTION_FILTER (16 on; default: every object).
    pub filter: Option<Filter>,
    /// GROUP_ORDER (16 on).
    pub group_order: Option<GroupOrder>,
    /// NEW_GROUP_REQUEST (16 on).
    pub new_group_request: Option<u64>,
    /// TRACK_NAMESPACE_PREFIX (18).
    pub namespace_prefix: Option<Namespace>,
    /// Parameters draft 14 does not know, as they came: ignored, kept so that nothing is
    /// lost in a log. Never sent.
    pub unknown: Parameters,
}

impl MessageParameters {
    /// The parameters that are set, as (parameter, value), tokens in order.
    fn entries(&self) -> Vec<(Param, Entry)> {
        let mut entries = Vec::new();
        let mut push = |param, entry: Option<Entry>| {
            if let Some(entry) = entry {
                entries.push((param, entry));
            }
        };
        push(
            Param::DeliveryTimeout,
            self.delivery_timeout.map(Entry::Millis),
        );
        push(
            Param::MaxCacheDuration,
            self.max_cache_duration.map(Entry::Millis),
        );
        push(
            Param::RendezvousTimeout,
            self.rendezvous_timeout.map(Entry::Millis),
        );
        push(
            Param::SubgroupDeliveryTimeout,
            self.subgroup_delivery_timeout.map(Entry::Millis),
        );
        push(Param::Expires, self.expires.map(Entry::Millis));
        push(
            Param::LargestObject,
            self.largest_object.map(Entry::Location),
        );
        push(Param::FillTimeout, self.fill_timeout.map(Entry::Millis));
        push(Param::Forward, self.forward.map(Entry::Flag));
        push(
            Param::SubscriberPriority,
            self.subscriber_priority.map(Entry::Byte),
        );
        push(Param::Filter, self.filter.map(Entry::Filter));
        push(Param::GroupOrder, self.group_order.map(Entry::Order));
        push(
            Param::NewGroupRequest,
            self.new_group_request.map(Entry::Int),
        );
        push(
            Param::NamespacePrefix,
            self.namespace_prefix.clone().map(Entry::Namespace),
        );
        for token in &self.authorization_tokens {
            entries.push((Param::AuthorizationToken, Entry::Bytes(token.clone())));
        }
        entries
    }

    /// Writes `Number of Parameters` and the parameters, in ascending type order. A
    /// parameter the draft does not define, or that `allowed` (this message's parameters)
    /// does not list, is refused.
    pub fn encode<B: BufMut>(
        &self,
        buf: &mut B,
        draft: Draft,
        allowed: &[Param],
    ) -> Result<(), EncodeError> {
        if draft == Draft::D16 && self.delivery_timeout == Some(Duration::ZERO) {
            return Err(EncodeError::InvalidValue("DELIVERY_TIMEOUT"));
        }
        let mut typed = Vec::new();
        for (param, entry) in self.entries() {
            let kind = param
                .kind(draft)
                .filter(|_| allowed.contains(&param))
                .ok_or(EncodeError::NotInVersion(param.name()))?;
            typed.push((kind, entry));
        }
        typed.sort_by_key(|(kind, _)| *kind);
        if !draft.has_typed_message_parameters() {
            let pairs = typed
                .into_iter()
                .map(|(kind, entry)| {
                    Ok(Parameter {
                        kind,
                        value: pair_value(entry, draft)?,
                    })
                })
                .collect::<Result<Vec<_>, EncodeError>>()?;
            return Parameters(pairs).encode_counted(buf, draft);
        }
        write_int(buf, typed.len() as u64, draft, "parameter count")?;
        let mut previous = 0;
        for (kind, entry) in typed {
            write_int(buf, kind - previous, draft, "parameter type")?;
            previous = kind;
            write_typed(buf, entry, draft)?;
        }
        Ok(())
    }

    /// Reads `Number of Parameters` and the parameters: see the module's docs for what is
    /// ignored and what closes the session on each draft.
    pub fn decode<B: Buf>(
        buf: &mut B,
        draft: Draft,
        allowed: &[Param],
    ) -> Result<Self, DecodeError> {
        let mut parameters = MessageParameters::default();
        if !draft.has_typed_message_parameters() {
            for pair in Parameters::decode_counted(buf, draft)?.0 {
                let Some(param) = Param::from_kind(pair.kind, draft) else {
                    if draft.refuses_unknown_message_parameters() {
                        return Err(DecodeError::UnknownParameter(pair.kind));
                    }
                    parameters.unknown.0.push(pair);
                    continue;
                };
                if allowed.contains(&param) {
                    let entry = pair_entry(param, pair.value, draft)?;
                    parameters.set(param, pair.kind, entry)?;
                }
            }
            return Ok(parameters);
        }
        let count = read_int(buf, draft)?;
        if count > MAX_PARAMETERS as u64 {
            return Err(DecodeError::TooMany("parameters"));
        }
        let mut kind = 0u64;
        for _ in 0..count {
            kind = kind
                .checked_add(read_int(buf, draft)?)
                .ok_or(DecodeError::InvalidValue("parameter type delta"))?;
            let param = Param::from_kind(kind, draft).ok_or(DecodeError::UnknownParameter(kind))?;
            if !allowed.contains(&param) {
                return Err(DecodeError::ParameterNotAllowed(kind));
            }
            let entry = read_typed(buf, param, draft)?;
            parameters.set(param, kind, entry)?;
        }
        Ok(parameters)
    }

    /// Stores one decoded parameter; a second of a kind that may appear once is a
    /// PROTOCOL_VIOLATION.
    fn set(&mut self, param: Param, kind: u64, entry: Entry) -> Result<(), DecodeError> {
        fn once<T>(slot: &mut Option<T>, value: T, kind: u64) -> Result<(), DecodeError> {
            match slot.replace(value) {
                Some(_) => Err(DecodeError::Duplicate(kind)),
                None => Ok(()),
            }
        }
        match (param, entry) {
            (Param::AuthorizationToken, Entry::Bytes(token)) => {
                self.authorization_tokens.push(token);
                Ok(())
            }
            (Param::DeliveryTimeout, Entry::Millis(d)) => once(&mut self.delivery_timeout, d, kind),
            (Param::MaxCacheDuration, Entry::Millis(d)) => {
                once(&mut self.max_cache_duration, d, kind)
            }
            (Param::RendezvousTimeout, Entry::Millis(d)) => {
                once(&mut self.rendezvous_timeout, d, kind)
            }
            (Param::SubgroupDeliveryTimeout, Entry::Millis(d)) => {
                once(&mut self.subgroup_delivery_timeout, d, kind)
            }
            (Param::Expires, Entry::Millis(d)) => once(&mut self.expires, d, kind),
            (Param::FillTimeout, Entry::Millis(d)) => once(&mut self.fill_timeout, d, kind),
            (Param::LargestObject, Entry::Location(l)) => once(&mut self.largest_object, l, kind),
            (Param::Forward, Entry::Flag(f)) => once(&mut self.forward, f, kind),
            (Param::SubscriberPriority, Entry::Byte(p)) => {
                once(&mut self.subscriber_priority, p, kind)
            }
            (Param::Filter, Entry::Filter(f)) => once(&mut self.filter, f, kind),
            (Param::GroupOrder, Entry::Order(o)) => once(&mut self.group_order, o, kind),
            (Param::NewGroupRequest, Entry::Int(g)) => once(&mut self.new_group_request, g, kind),
            (Param::NamespacePrefix, Entry::Namespace(n)) => {
                once(&mut self.namespace_prefix, n, kind)
            }
            _ => Err(DecodeError::InvalidValue("message parameter")),
        }
    }
}

fn millis(duration: Duration) -> Result<u64, EncodeError> {
    u64::try_from(duration.as_millis()).map_err(|_| EncodeError::BoundsExceeded("duration"))
}

/// `entry` as a Key-Value-Pair value (14, 16): integers under even types, bytes (a
/// location or a filter encoded inside) under odd ones.
fn pair_value(entry: Entry, draft: Draft) -> Result<Value, EncodeError> {
    let inner = |write: &dyn Fn(&mut Vec<u8>) -> Result<(), EncodeError>| {
        let mut bytes = Vec::new();
        write(&mut bytes)?;
        Ok::<_, EncodeError>(Value::Bytes(bytes.into()))
    };
    Ok(match entry {
        Entry::Millis(d) => Value::Int(millis(d)?),
        Entry::Int(value) => Value::Int(value),
        Entry::Byte(value) => Value::Int(u64::from(value)),
        Entry::Flag(flag) => Value::Int(u64::from(flag)),
        Entry::Order(order) => Value::Int(u64::from(order.value())),
        Entry::Bytes(bytes) => Value::Bytes(bytes),
        Entry::Location(location) => inner(&|b| location.encode(b, draft))?,
        Entry::Filter(filter) => inner(&|b| filter.encode(b, draft))?,
        Entry::Namespace(_) => return Err(EncodeError::NotInVersion("TRACK_NAMESPACE_PREFIX")),
    })
}

/// A Key-Value-Pair's value as `param` (14, 16), checked.
fn pair_entry(param: Param, value: Value, draft: Draft) -> Result<Entry, DecodeError> {
    let int = |value: &Value| match value {
        Value::Int(value) => Ok(*value),
        Value::Bytes(_) => Err(DecodeError::InvalidValue(param.name())),
    };
    Ok(match param {
        Param::AuthorizationToken | Param::LargestObject | Param::Filter => {
            let Value::Bytes(bytes) = value else {
                return Err(DecodeError::InvalidValue(param.name()));
            };
            let mut inner = &bytes[..];
            let entry = match param {
                Param::LargestObject => Entry::Location(Location::decode(&mut inner, draft)?),
                Param::Filter => Entry::Filter(Filter::decode(&mut inner, draft)?),
                _ => return Ok(Entry::Bytes(bytes)),
            };
            // "filter length ≠ parameter length" is a PROTOCOL_VIOLATION.
            if !inner.is_empty() {
                return Err(DecodeError::Long);
            }
            entry
        }
        Param::Forward => match int(&value)? {
            0 => Entry::Flag(false),
            1 => Entry::Flag(true),
            _ => return Err(DecodeError::InvalidValue("FORWARD")),
        },
        Param::SubscriberPriority => Entry::Byte(
            u8::try_from(int(&value)?)
                .map_err(|_| DecodeError::InvalidValue("SUBSCRIBER_PRIORITY"))?,
        ),
        Param::GroupOrder => Entry::Order(GroupOrder::from_value(int(&value)?)?),
        Param::NewGroupRequest => Entry::Int(int(&value)?),
        Param::NamespacePrefix => return Err(DecodeError::InvalidValue(param.name())),
        // 16: "MUST contain a value greater than 0".
        Param::DeliveryTimeout if draft == Draft::D16 && int(&value)? == 0 => {
            return Err(DecodeError::InvalidValue("DELIVERY_TIMEOUT"));
        }
        _ => Entry::Millis(Duration::from_millis(int(&value)?)),
    })
}

/// Writes `entry` in draft 18's encoding for its parameter.
fn write_typed<B: BufMut>(buf: &mut B, entry: Entry, draft: Draft) -> Result<(), EncodeError> {
    match entry {
        Entry::Millis(d) => write_int(buf, millis(d)?, draft, "duration"),
        Entry::Int(value) => write_int(buf, value, draft, "parameter value"),
        Entry::Byte(value) => {
            buf.put_u8(value);
            Ok(())
        }
        Entry::Flag(flag) => {
            buf.put_u8(u8::from(flag));
            Ok(())
        }
        Entry::Order(order) => {
            buf.put_u8(order.value());
            Ok(())
        }
        Entry::Bytes(bytes) => {
            if bytes.len() > MAX_VALUE_BYTES {
                return Err(EncodeError::BoundsExceeded("parameter value"));
            }
            write_bytes(buf, &bytes, draft)
        }
        Entry::Location(location) => location.encode(buf, draft),
        Entry::Filter(filter) => {
            let mut inner = Vec::new();
            filter.encode(&mut inner, draft)?;
            write_bytes(buf, &inner, draft)
        }
        Entry::Namespace(namespace) => namespace.encode(buf, draft),
    }
}

/// Reads `param`'s value in draft 18's encoding.
fn read_typed<B: Buf>(buf: &mut B, param: Param, draft: Draft) -> Result<Entry, DecodeError> {
    Ok(match param {
        Param::AuthorizationToken => {
            Entry::Bytes(read_bytes(buf, draft, MAX_VALUE_BYTES, param.name())?)
        }
        Param::Filter => {
            let bytes = read_bytes(buf, draft, MAX_VALUE_BYTES, param.name())?;
            let mut inner = &bytes[..];
            let filter = Filter::decode(&mut inner, draft)?;
            if !inner.is_empty() {
                return Err(DecodeError::Long);
            }
            Entry::Filter(filter)
        }
        Param::LargestObject => Entry::Location(Location::decode(buf, draft)?),
        Param::Forward => Entry::Flag(read_flag(buf, "FORWARD")?),
        Param::SubscriberPriority => Entry::Byte(read_u8(buf)?),
        Param::GroupOrder => Entry::Order(GroupOrder::from_value(u64::from(read_u8(buf)?))?),
        Param::NewGroupRequest => Entry::Int(read_int(buf, draft)?),
        Param::NamespacePrefix => Entry::Namespace(Namespace::decode_prefix(buf, draft)?),
        // The timeouts and EXPIRES: integers of milliseconds (RENDEZVOUS_TIMEOUT's and
        // FILL_TIMEOUT's encodings are not stated in draft 18; read as the other timeouts).
        _ => Entry::Millis(Duration::from_millis(read_int(buf, draft)?)),
    })
}

#[cfg(test)]
mod tests;
