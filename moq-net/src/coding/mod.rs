//! The moq-lite wire codec: every message of moq-lite-03, -04, -05 and -06-wip, byte for
//! byte as deployed peers speak them (`../shared/spec/moq-lite-05.md` in the project, with
//! its "Version deltas"; the draft text is -06).
//!
//! - [`varint`]: QUIC varints and zigzag;
//! - one file per stream: [`Setup`], the announce stream ([`AnnounceRequest`],
//!   [`AnnounceOk`], [`Announce`], and -06's [`TypedAnnounce`]), the track stream ([`Track`], [`TrackInfo`]), the
//!   subscribe stream ([`Subscribe`], [`SubscribeUpdate`], [`SubscribeResponse`]), the group
//!   stream ([`Group`], [`FrameHeader`]), [`Fetch`], [`Probe`], [`GoAway`], [`Datagram`],
//!   and the [`BidiStream`] / [`UniStream`] types that open streams.
//!
//! Decoding is bounded and never panics: every length is checked against the input, every
//! list and path against its limit, and the errors say which ([`DecodeError`]).
//! [`DecodeError::Short`] means "need more bytes", which a stream reader waits out.
//! Every function takes the [`Version`]; what differs between versions is asked of it
//! (`Version::has_*`), in the message that differs. A message or field a version does not
//! have is [`EncodeError::NotInVersion`] / [`DecodeError::NotInVersion`], never silently
//! dropped.
//!
//! ```
//! use moqx_net::coding::{Message, Subscribe, Version};
//! use moqx_net::model::Path;
//! use std::time::Duration;
//!
//! let subscribe = Subscribe {
//!     id: 0,
//!     broadcast: Path::new("room/alice"),
//!     track: "video".into(),
//!     priority: 1,
//!     ordered: true,
//!     max_latency: Duration::from_millis(500),
//!     start: None,
//!     end: None,
//! };
//! let bytes = subscribe.to_vec(Version::Lite05).unwrap();
//! assert_eq!(bytes[0] as usize, bytes.len() - 1, "a length prefix, then the body");
//! assert_eq!(Subscribe::decode(&mut &bytes[..], Version::Lite05), Ok(subscribe));
//! ```

mod announce;
mod announce_typed;
mod datagram;
mod error;
mod fetch;
mod fields;
mod goaway;
mod group;
mod message;
mod probe;
mod setup;
mod stream;
mod subscribe;
mod track;
mod version;

pub mod varint;

pub use announce::{Announce, AnnounceOk, AnnounceRequest, AnnounceStatus, MAX_HOPS};
pub use announce_typed::TypedAnnounce;
pub use datagram::Datagram;
pub use error::{DecodeError, EncodeError};
pub use fetch::Fetch;
pub use fields::MAX_PATH_PARTS;
pub use goaway::GoAway;
pub use group::{FrameHeader, Group, GroupDecoder, GroupItem};
pub use message::Message;
pub use probe::Probe;
pub use setup::{MAX_SETUP_PARAMETERS, ProbeLevel, Role, Setup};
pub use stream::{BidiStream, UniStream};
pub use subscribe::{Subscribe, SubscribeResponse, SubscribeUpdate};
pub use track::{Track, TrackInfo};
pub use version::{UnknownVersion, Version};
