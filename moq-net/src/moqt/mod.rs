//! The IETF moq-transport (MOQT) wire codec: drafts 14, 16 and 18, byte for byte from each
//! draft's text (`draft-ietf-moq-transport-14`, `-16` and `-18`), beside the moq-lite codec
//! ([`crate::coding`]) and built the same way.
//!
//! - [`Draft`]: the drafts, their ALPNs, and every difference between them as a question
//!   (`has_*`);
//! - [`int`]: each draft's integers (QUIC varints up to 17, `vi64` from 18);
//! - [`Parameters`]: Key-Value-Pairs (absolute types on 14, deltas from 16);
//! - [`MessageParameters`]: the optional fields of requests and replies, typed, with what
//!   each draft ignores and what closes the session ([`Param`]);
//! - [`Filter`] and [`GroupOrder`]: what a subscription asks for;
//! - [`Location`], [`Namespace`], track names and reason phrases, with their bounds;
//! - [`Control`] and [`Frame`]: control message framing (`Type`, `Length (16)`, payload);
//! - [`ClientSetup`] and [`ServerSetup`] with their [`SetupOptions`];
//! - [`Termination`]: the session termination codes, and [`Error`](crate::Error)'s one
//!   mapping to them;
//! - [`GoAway`], and request-id flow control: [`MaxRequestId`], [`RequestsBlocked`];
//! - replies: [`RequestOk`] and [`RequestError`] (16 on, with 18's [`Redirect`]), and
//!   draft 14's per-request [`Accepted`] and [`Refused`];
//! - namespace discovery: [`PublishNamespace`] and how it ends, [`SubscribeNamespace`],
//!   [`SubscribeTracks`], [`NamespaceAnnounced`], [`NamespaceDone`] and 18's
//!   [`PublishBlocked`];
//! - subscriptions: [`Subscribe`], [`SubscribeOk`], [`RequestUpdate`], [`Unsubscribe`],
//!   [`TrackStatus`] (and 14's [`TrackStatusOk`]); and those a publisher
//!   starts: [`Publish`], [`PublishOk`], [`PublishDone`];
//! - fetching past objects: [`Fetch`] (with its [`FetchRange`]), [`FetchOk`], [`FetchCancel`];
//! - the data plane: [`SubgroupHeader`] and the [`SubgroupObjects`] after it, and
//!   [`ObjectDatagram`], with each object's [`ObjectStatus`] and properties; FETCH's
//!   stream: [`FetchHeader`] and the [`FetchObjects`] after it.
//!
//! This is the codec. The session machine ([`crate::session`], with a
//! [`Version::MOQT`](crate::coding::Version::MOQT) version) speaks MOQT with it: control
//! streams, SETUP, GOAWAY, request ids, namespaces, subscriptions and subgroup streams.
//!
//! Decoding is bounded and never panics, as in the moq-lite codec: every length is checked
//! against the input and against the draft's bound, and [`DecodeError::Short`] means "need
//! more bytes".
//!
//! ```
//! use moqx_net::moqt::{ClientSetup, Control, Draft, SetupOptions};
//!
//! let options = SetupOptions { path: Some("/chat".into()), ..SetupOptions::default() };
//! let setup = ClientSetup { versions: vec![], options };
//! let bytes = setup.to_vec(Draft::D16).unwrap();
//! assert_eq!(bytes[0], 0x20, "CLIENT_SETUP");
//! assert_eq!(ClientSetup::decode(&mut &bytes[..], Draft::D16), Ok(setup));
//! ```
//!
//! [`DecodeError::Short`]: crate::coding::DecodeError::Short

mod control;
mod datagram;
mod draft;
mod fetch;
mod fetch_stream;
mod fields;
mod filter;
mod goaway;
mod message_params;
mod namespace;
mod object;
mod params;
mod publish;
mod reply;
mod setup;
mod subgroup;
mod subscribe;
mod termination;

pub mod int;

pub use control::{Control, Frame, MAX_PAYLOAD_BYTES};
pub use datagram::{ObjectDatagram, PADDING_DATAGRAM};
pub use draft::Draft;
pub use fetch::{FETCH_OK_PARAMETERS, FETCH_PARAMETERS, Fetch, FetchCancel, FetchOk, FetchRange};
pub use fetch_stream::{FETCH_HEADER, FetchHeader, FetchItem, FetchObject, FetchObjects};
pub use fields::{
    Location, MAX_FULL_TRACK_NAME_BYTES, MAX_NAMESPACE_FIELDS, MAX_REASON_BYTES, Namespace,
    read_reason, read_track_name, write_reason, write_track_name,
};
pub use filter::{Filter, GroupOrder};
pub use goaway::{GoAway, MAX_GOAWAY_URI_BYTES, MaxRequestId, RequestsBlocked};
pub use message_params::{MessageParameters, Param};
pub use namespace::{
    NamespaceAnnounced, NamespaceDone, NamespaceNotice, PUBLISH_NAMESPACE_PARAMETERS, Publication,
    PublishBlocked, PublishNamespace, PublishNamespaceCancel, PublishNamespaceDone,
    SUBSCRIBE_TRACKS_PARAMETERS, SubscribeNamespace, SubscribeOptions, SubscribeTracks,
    UnsubscribeNamespace, subscribe_namespace_parameters,
};
pub use object::{MAX_PROPERTIES_BYTES, ObjectStatus};
pub use params::{MAX_PARAMETERS, MAX_VALUE_BYTES, Parameter, Parameters, Value};
pub use publish::{
    PUBLISH_OK_PARAMETERS, Publish, PublishDone, PublishOk, UNKNOWN_STREAM_COUNT,
    publish_parameters,
};
pub use reply::{
    Accepted, FetchError, PublishError, PublishNamespaceError, PublishNamespaceOk, REDIRECT,
    Redirect, Refused, RequestError, RequestOk, SubscribeError, SubscribeNamespaceError,
    SubscribeNamespaceOk, TrackStatusError, request_ok_parameters,
};
pub use setup::{ClientSetup, MAX_SETUP_VERSIONS, ServerSetup, SetupOptions};
pub use subgroup::{PADDING_STREAM, SubgroupHeader, SubgroupId, SubgroupObject, SubgroupObjects};
pub use subscribe::{
    DEFAULT_SUBSCRIBER_PRIORITY, REQUEST_UPDATE_PARAMETERS, RequestUpdate, SUBSCRIBE_PARAMETERS,
    Subscribe, SubscribeOk, TrackAccepted, TrackRequest, TrackStatus, TrackStatusOk, Unsubscribe,
};
pub use termination::Termination;

#[cfg(test)]
mod data_vectors;
#[cfg(test)]
mod track_vectors;
#[cfg(test)]
mod vectors;
