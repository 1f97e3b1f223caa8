//! How a session is configured: what it serves and fills ([`SessionConfig`]), the bounds
//! a peer meets ([`SessionLimits`]), what it caches ([`CachePolicy`]), and the hook that
//! decides a client's rights from its SETUP ([`Authorize`]). The configuration structs are
//! `#[non_exhaustive]`: start from `Default` and set fields, or use the builders.

use std::sync::Arc;

use crate::Error;
use crate::coding::{Setup, Version};
use crate::model::{Origin, Path};

/// What a session serves and where it puts what it receives.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionConfig {
    /// The wire version the session speaks. A driver sets it from what the connection
    /// negotiated; a session never negotiates by itself.
    pub version: Version,
    /// Broadcasts offered to the peer; `None` serves nothing (a pure subscriber).
    pub publish: Option<Origin>,
    /// Where the peer's broadcasts are published locally; `None` subscribes to nothing.
    pub subscribe: Option<Origin>,
    /// The prefix of the peer's broadcasts to follow.
    pub subscribe_prefix: Path,
    /// The SETUP Path parameter a client sends on raw QUIC (the request path and query).
    pub path: Option<String>,
    /// A server only: the path and query the client named in its request, on a binding
    /// that carries it outside SETUP (a WebTransport CONNECT, a WebSocket upgrade). The
    /// [`authorize`](Self::authorize) hook sees it as the SETUP's path (in place of any
    /// path the SETUP names), so that one hook decides for every binding, on the path the
    /// request was checked on.
    pub request_path: Option<String>,
    /// This endpoint's origin (hop) id, carried in ANNOUNCE_OK and used to drop looped
    /// announcements; 0 for none.
    pub origin_id: u64,
    /// What reaching a broadcast through this peer costs on top of the cost the peer
    /// announces (moq-lite-06's Route Cost; before -06, where nothing is announced, the
    /// hops behind the peer count one each). Routes rank by total cost, so a relay
    /// prices a link it would rather not use (a slower region, a draining peer) above
    /// the others. 1 by default: cost is hop count.
    pub link_cost: u64,
    /// How long a subscription the publisher ended waits for its last groups, which travel
    /// on their own streams and may arrive after the end, before its track finishes anyway.
    pub trailing_groups_timeout: std::time::Duration,
    /// How long a subscription to the peer stays up after its last local consumer left,
    /// before it is cancelled. A consumer that comes back within it (a TRACK query followed
    /// by the SUBSCRIBE it was for, a subscriber reconnecting) finds the track still
    /// running instead of a cancelled one and a new subscription's round trip. Zero cancels
    /// at once.
    pub unused_track_linger: std::time::Duration,
    /// A server only: decides from the client's SETUP (its path and query, where a raw
    /// QUIC client carries its token) what the session serves and fills, replacing
    /// [`publish`](Self::publish) and [`subscribe`](Self::subscribe); an error closes the
    /// session with that error's code ([`Error::Unauthorized`]). Nothing is served or
    /// accepted before it ran: the server asks for the client's announcements only after.
    pub authorize: Option<Authorize>,
    /// The memory budget every session of a relay shares
    /// ([`MemoryBudget`](crate::model::MemoryBudget)): the groups received from the peer
    /// are charged to it, their tracks' caches shed under its pressure, and while it is
    /// full the peer's new subscriptions are refused with [`Error::BoundsExceeded`] and a
    /// received frame that does not fit refuses its group. `None`: no shared bound.
    pub memory_budget: Option<crate::model::MemoryBudget>,
    /// How long the session may live from now, after which it closes with
    /// [`Error::Unauthorized`] (the client's token expired); `None` for no end. An
    /// [`authorize`](Self::authorize) hook's [`Origins::valid_for`] replaces it, counted
    /// from the SETUP it decided on.
    pub valid_for: Option<std::time::Duration>,
    /// Whether the peer's announced routes rank its broadcasts: a broadcast with a shorter
    /// route is preferred at a path several sessions publish. A relay sets it only for
    /// peers it trusts (other relays of its cluster); for a client, whose route is
    /// whatever it claims, every announcement is ranked as direct, so a client cannot get
    /// ahead of another by claiming fewer hops.
    pub trust_peer_routes: bool,
    /// The bounds on what the peer may make this session hold or do.
    pub limits: SessionLimits,
    /// What this session keeps of the tracks it receives, for late joiners.
    pub cache: CachePolicy,
}

/// What a session serves ([`publish`](Origins::publish)) and fills
/// ([`subscribe`](Origins::subscribe)): an [`Authorize`] hook's verdict.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    /// Broadcasts offered to the peer.
    pub publish: Option<Origin>,
    /// Where the peer's broadcasts are published.
    pub subscribe: Option<Origin>,
    /// How long the client is let in for, from its SETUP (its token's expiry); the session
    /// closes with [`Error::Unauthorized`] then. `None` for no end.
    pub valid_for: Option<std::time::Duration>,
    /// The client is a relay of this one's cluster: its announced routes rank its
    /// broadcasts ([`SessionConfig::trust_peer_routes`]). `false` leaves the session's
    /// setting as it was.
    pub trust_routes: bool,
}

/// The hook of [`SessionConfig::authorize`]: the client's SETUP in (its path the one the
/// client named, in SETUP or in its request: [`SessionConfig::request_path`]), the session's origins
/// (typically [scoped](Origin::scope) views of a relay's origin) or the error to close it
/// with out.
#[derive(Clone)]
pub struct Authorize(Arc<Decide>);

/// The function inside an [`Authorize`].
type Decide = dyn Fn(&Setup) -> Result<Origins, Error> + Send + Sync;

impl Authorize {
    /// Wraps `decide`.
    pub fn new(decide: impl Fn(&Setup) -> Result<Origins, Error> + Send + Sync + 'static) -> Self {
        Self(Arc::new(decide))
    }

    /// Runs the hook.
    pub fn decide(&self, setup: &Setup) -> Result<Origins, Error> {
        (self.0)(setup)
    }
}

impl std::fmt::Debug for Authorize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authorize(..)")
    }
}

impl SessionConfig {
    /// A relay's session: the peer's broadcasts are published into `origin`, and
    /// everything in `origin` is offered to the peer (so every session sharing it meets
    /// every other's broadcasts).
    pub fn relay(origin: &Origin) -> Self {
        Self::default()
            .with_publisher(origin)
            .with_subscriber(origin)
    }

    /// Offers the broadcasts of `origin` to the peer ([`publish`](Self::publish)).
    pub fn with_publisher(mut self, origin: &Origin) -> Self {
        self.publish = Some(origin.clone());
        self
    }

    /// Publishes the peer's broadcasts into `origin` ([`subscribe`](Self::subscribe)).
    pub fn with_subscriber(mut self, origin: &Origin) -> Self {
        self.subscribe = Some(origin.clone());
        self
    }

    /// Speaks `version` ([`version`](Self::version)); a driver replaces it with the one
    /// the connection negotiated.
    pub fn with_version(mut self, version: Version) -> Self {
        self.version = version;
        self
    }

    /// Decides what each client's session serves and fills from its SETUP
    /// ([`authorize`](Self::authorize)).
    pub fn with_authorize(mut self, authorize: Authorize) -> Self {
        self.authorize = Some(authorize);
        self
    }
}

impl Default for SessionConfig {
    /// moq-lite-05, serving and subscribing to nothing, 1 s for trailing groups, 1 s of
    /// linger for unused subscriptions, no authorization hook, no end of validity, the
    /// peer's routes trusted, the default [`SessionLimits`] and [`CachePolicy`].
    fn default() -> Self {
        Self {
            version: Version::Lite05,
            publish: None,
            subscribe: None,
            subscribe_prefix: Path::root(),
            path: None,
            request_path: None,
            origin_id: 0,
            link_cost: 1,
            trailing_groups_timeout: std::time::Duration::from_secs(1),
            unused_track_linger: std::time::Duration::from_secs(1),
            authorize: None,
            memory_budget: None,
            valid_for: None,
            trust_peer_routes: true,
            limits: SessionLimits::default(),
            cache: CachePolicy::default(),
        }
    }
}

/// The bounds on what a peer may make a session hold or do: every one is met with the
/// error its documentation names, the session going on where it can.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionLimits {
    /// The largest frame accepted from the peer, in bytes.
    pub max_frame_size: u64,
    /// The most requests the peer may have served at once (SUBSCRIBE, and TRACK and FETCH
    /// while they are answered); one more is refused with [`Error::BoundsExceeded`] on its
    /// own stream, the session going on.
    pub max_subscriptions: usize,
    /// The most announce streams the peer may have open at once (each follows the
    /// published origin under a prefix); one more is refused with
    /// [`Error::BoundsExceeded`] on its own stream.
    pub max_announce_requests: usize,
    /// The most broadcasts the peer may have announced to this session at once; one more
    /// closes the session with [`Error::BoundsExceeded`].
    pub max_announces: usize,
    /// The most bytes of path those broadcasts may hold together; past it the session
    /// closes with [`Error::BoundsExceeded`].
    pub max_announce_path_bytes: usize,
    /// The most groups kept waiting for the peer's stream credit, and apart from them the
    /// most group streams open and unfinished; past either the oldest are dropped (a
    /// waiting one unsent, an open one reset with [`Error::Lagged`];
    /// [`SessionCounters::groups_dropped`](super::SessionCounters::groups_dropped)). A subscriber that withholds stream or data
    /// credit loses groups, as a slow one would, instead of making the session hold them
    /// all.
    pub max_queued_groups: usize,
    /// The most payload bytes of one group received from the peer; past it the group is
    /// aborted and its stream stopped with [`Error::BoundsExceeded`]
    /// ([`SessionCounters::groups_refused`](super::SessionCounters::groups_refused)), the session going on. A group is cached
    /// whole, so a group that never ends must not grow without bound.
    pub max_group_bytes: u64,
    /// The most frames of one group received from the peer, the same way.
    pub max_group_frames: u64,
    /// The most payload bytes in all the peer's unfinished groups together (a peer may
    /// keep as many group streams open as its stream limit allows); a frame past it
    /// refuses its group the same way.
    pub max_receiving_group_bytes: u64,
    /// The largest control message accepted from the peer, in bytes (its length prefix
    /// included). Reading returns flow-control credit, so QUIC's windows do not bound
    /// what a peer can make a session buffer: this does. A larger one closes the session
    /// with [`Error::BoundsExceeded`].
    pub max_message_bytes: usize,
    /// The largest SETUP accepted, in bytes: smaller, since a server reads it before it
    /// knows who the client is. It carries the path and its query (a token).
    pub max_setup_bytes: usize,
    /// A server only: how long a client has to send its SETUP before the session closes
    /// with [`Error::Timeout`] (a connection that never says who it is holds no slot).
    pub setup_timeout: std::time::Duration,
}

impl Default for SessionLimits {
    /// 16 MiB frames, 1,000 requests and 16 announce streams served at once, 10,000
    /// announced broadcasts with 1 MiB of path, 1,024 groups waiting for credit, groups of
    /// at most 64 MiB and 65,536 frames and 256 MiB in unfinished groups together, 64 KiB
    /// control messages, a 16 KiB SETUP, and 10 s for a client's SETUP.
    fn default() -> Self {
        Self {
            max_frame_size: 16 << 20,
            max_subscriptions: 1000,
            max_announce_requests: 16,
            max_announces: 10_000,
            max_announce_path_bytes: 1 << 20,
            max_queued_groups: 1024,
            max_group_bytes: 64 << 20,
            max_group_frames: 65_536,
            max_receiving_group_bytes: 256 << 20,
            max_message_bytes: 64 << 10,
            max_setup_bytes: 16 << 10,
            setup_timeout: std::time::Duration::from_secs(10),
        }
    }
}

/// What a session keeps of each track it receives from the peer, for subscribers that
/// join late (a relay's cache per upstream track).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CachePolicy {
    /// Groups kept for late joiners in each track this session receives from the peer
    /// (a relay's cache per upstream track).
    pub groups: usize,
    /// The most payload bytes cached per received track, on top of `cache_groups`
    /// ([`Track::cache_bytes`](crate::model::Track::cache_bytes)); `None` for no byte bound.
    pub bytes: Option<u64>,
}

impl Default for CachePolicy {
    /// 32 groups per track, and no byte bound.
    fn default() -> Self {
        Self {
            groups: 32,
            bytes: None,
        }
    }
}

impl CachePolicy {
    /// Keeps `groups` groups per track.
    pub fn with_groups(mut self, groups: usize) -> Self {
        self.groups = groups;
        self
    }

    /// Keeps at most `bytes` payload bytes per track (on top of the group count).
    pub fn with_bytes(mut self, bytes: Option<u64>) -> Self {
        self.bytes = bytes;
        self
    }
}
