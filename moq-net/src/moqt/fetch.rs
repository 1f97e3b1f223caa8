//! Fetching past objects (§ "FETCH", "FETCH_OK", "FETCH_CANCEL"): a range of one track
//! (standalone), or what comes before a subscription's start (joining, relative or
//! absolute).

use bytes::{Buf, BufMut, Bytes};

use super::Draft;
use super::control::Control;
use super::fields::{Location, Namespace, read_track_name, write_track_name};
use super::filter::{GroupOrder, read_flag, read_optional_order, read_u8};
use super::int::{read_int, write_int};
use super::message_params::{MessageParameters, Param};
use super::params::Parameters;
use super::reply::{read_properties, read_reply_id, write_properties, write_reply_id};
use super::subscribe::DEFAULT_SUBSCRIBER_PRIORITY;
use crate::coding::{DecodeError, EncodeError};

/// The parameters FETCH may carry (each where its draft defines it; priority and group
/// order are fields on 14).
pub const FETCH_PARAMETERS: &[Param] = &[
    Param::AuthorizationToken,
    Param::SubscriberPriority,
    Param::GroupOrder,
    Param::FillTimeout,
];

/// The parameters FETCH_OK may carry.
pub const FETCH_OK_PARAMETERS: &[Param] = &[Param::MaxCacheDuration];

/// What a FETCH asks for: its `Fetch Type` and the fields that type has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchRange {
    /// A range of one track (type `0x1`): from `start` up to `end` (an `end` object of 0:
    /// the whole of `end`'s group).
    Standalone {
        /// The track's namespace.
        namespace: Namespace,
        /// The track's name.
        name: Bytes,
        /// The first object.
        start: Location,
        /// Where it ends (see above).
        end: Location,
    },
    /// The `groups_back` groups before the largest object of subscription `request_id`
    /// (type `0x2`).
    RelativeJoining {
        /// The SUBSCRIBE it joins.
        request_id: u64,
        /// How many groups before the subscription's largest group.
        groups_back: u64,
    },
    /// From group `start_group` up to subscription `request_id`'s start (type `0x3`).
    AbsoluteJoining {
        /// The SUBSCRIBE it joins.
        request_id: u64,
        /// The first group.
        start_group: u64,
    },
}

impl Default for FetchRange {
    fn default() -> Self {
        FetchRange::RelativeJoining {
            request_id: 0,
            groups_back: 0,
        }
    }
}

impl FetchRange {
    fn encode<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        match self {
            FetchRange::Standalone {
                namespace,
                name,
                start,
                end,
            } => {
                write_int(buf, 0x1, draft, "fetch type")?;
                namespace.encode(buf, draft)?;
                write_track_name(buf, name, draft, namespace)?;
                start.encode(buf, draft)?;
                end.encode(buf, draft)
            }
            FetchRange::RelativeJoining {
                request_id,
                groups_back: start,
            }
            | FetchRange::AbsoluteJoining {
                request_id,
                start_group: start,
            } => {
                let kind = if matches!(self, FetchRange::RelativeJoining { .. }) {
                    0x2
                } else {
                    0x3
                };
                write_int(buf, kind, draft, "fetch type")?;
                write_int(buf, *request_id, draft, "joining request id")?;
                write_int(buf, *start, draft, "joining start")
            }
        }
    }

    fn decode<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        Ok(match read_int(buf, draft)? {
            0x1 => {
                let namespace = Namespace::decode(buf, draft)?;
                let name = read_track_name(buf, draft, &namespace)?;
                FetchRange::Standalone {
                    namespace,
                    name,
                    start: Location::decode(buf, draft)?,
                    end: Location::decode(buf, draft)?,
                }
            }
            0x2 => FetchRange::RelativeJoining {
                request_id: read_int(buf, draft)?,
                groups_back: read_int(buf, draft)?,
            },
            0x3 => FetchRange::AbsoluteJoining {
                request_id: read_int(buf, draft)?,
                start_group: read_int(buf, draft)?,
            },
            _ => return Err(DecodeError::InvalidValue("fetch type")),
        })
    }
}

/// FETCH (`0x16`, every draft).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fetch {
    /// Its request id.
    pub request_id: u64,
    /// What it asks for.
    pub range: FetchRange,
    /// Its parameters; subscriber priority and group order among them on every draft
    /// (fields on 14).
    pub parameters: MessageParameters,
}

impl Control for Fetch {
    const NAME: &'static str = "FETCH";

    fn message_type(_: Draft) -> Option<u64> {
        Some(0x16)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_int(buf, self.request_id, draft, "request id")?;
        let mut rest = self.parameters.clone();
        if !draft.has_subscription_parameters() {
            buf.put_u8(
                rest.subscriber_priority
                    .take()
                    .unwrap_or(DEFAULT_SUBSCRIBER_PRIORITY),
            );
            buf.put_u8(rest.group_order.take().map_or(0, GroupOrder::value));
        }
        self.range.encode(buf, draft)?;
        rest.encode(buf, draft, FETCH_PARAMETERS)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_int(buf, draft)?;
        let fields = if draft.has_subscription_parameters() {
            None
        } else {
            Some((read_u8(buf)?, read_optional_order(buf)?))
        };
        let range = FetchRange::decode(buf, draft)?;
        let mut parameters = MessageParameters::decode(buf, draft, FETCH_PARAMETERS)?;
        if let Some((priority, order)) = fields {
            parameters.subscriber_priority = Some(priority);
            parameters.group_order = order;
        }
        Ok(Self {
            request_id,
            range,
            parameters,
        })
    }
}

/// FETCH_OK (`0x18`, every draft): the fetch is accepted; its objects follow on a FETCH
/// stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchOk {
    /// The FETCH answered (14, 16; on 18 the stream says).
    pub request_id: Option<u64>,
    /// The order the objects come in (14 only).
    pub group_order: Option<GroupOrder>,
    /// Whether the track ends within the range.
    pub end_of_track: bool,
    /// The largest location the fetch will return.
    pub end: Location,
    /// Its parameters.
    pub parameters: MessageParameters,
    /// Track extensions (16) or properties (18), as they came.
    pub properties: Parameters,
}

impl Control for FetchOk {
    const NAME: &'static str = "FETCH_OK";

    fn message_type(_: Draft) -> Option<u64> {
        Some(0x18)
    }

    fn encode_payload<B: BufMut>(&self, buf: &mut B, draft: Draft) -> Result<(), EncodeError> {
        write_reply_id(buf, self.request_id, draft)?;
        match (draft.has_subscription_parameters(), self.group_order) {
            (false, Some(order)) => buf.put_u8(order.value()),
            (false, None) => return Err(EncodeError::InvalidValue("FETCH_OK group order")),
            (true, Some(_)) => return Err(EncodeError::NotInVersion("FETCH_OK group order")),
            (true, None) => {}
        }
        buf.put_u8(u8::from(self.end_of_track));
        self.end.encode(buf, draft)?;
        self.parameters.encode(buf, draft, FETCH_OK_PARAMETERS)?;
        let present = draft.has_subscription_parameters();
        write_properties(buf, &self.properties, draft, present)
    }

    fn decode_payload<B: Buf>(buf: &mut B, draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_reply_id(buf, draft)?;
        let group_order = if draft.has_subscription_parameters() {
            None
        } else {
            Some(GroupOrder::from_value(u64::from(read_u8(buf)?))?)
        };
        Ok(Self {
            request_id,
            group_order,
            end_of_track: read_flag(buf, "end of track")?,
            end: Location::decode(buf, draft)?,
            parameters: MessageParameters::decode(buf, draft, FETCH_OK_PARAMETERS)?,
            properties: read_properties(buf, draft, draft.has_subscription_parameters())?,
        })
    }
}

/// FETCH_CANCEL (`0x17`, 14 and 16): the fetcher no longer wants the objects (18 resets the
/// request's stream instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchCancel {
    /// The FETCH it cancels.
    pub request_id: u64,
}

impl Control for FetchCancel {
    const NAME: &'static str = "FETCH_CANCEL";

    fn message_type(draft: Draft) -> Option<u64> {
        (!draft.has_request_streams()).then_some(0x17)
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
