//! moq-lite sessions: the protocol machine between a transport and the model.
//!
//! A session is two halves over one connection:
//!
//! - the **publisher** half serves what [`SessionConfig::publish`] holds: it answers the
//!   peer's announce requests from that [`Origin`], its TRACK requests with TRACK_INFO, and
//!   its subscriptions with one uni stream per group;
//! - the **subscriber** half fills [`SessionConfig::subscribe`]: it follows the peer's
//!   announcements into that origin, and when a local consumer asks one of those broadcasts
//!   for a track, it asks the peer (TRACK, then SUBSCRIBE), routes the group streams into
//!   the track, and cancels upstream when the last local consumer leaves.
//!
//! A relay is a server whose two halves share one origin.
//!
//! [`connect`] and [`accept`] build the [`SessionMachine`], hand it to the [`Runtime`] to run,
//! and return a [`Session`] handle. The handle is `Send + Sync` whatever the transport and
//! never touches it: closing and watching go through kio cells the machine observes.
//!
//! The machine is a named state machine (no `async` blocks inside), so it is `Send` exactly
//! when the transport is.

mod announce;
mod context;
mod discover;
mod machine;
mod own_wake;
mod publisher;
mod remote;
mod setup;
mod stream;
mod subscriber;
mod tasks;

use std::sync::Arc;
use std::task::Poll;

use moqx_kio::Waiter;

pub use machine::SessionMachine;

use crate::Error;
use crate::coding::{Setup, Version};
use crate::model::{Origin, Path};
use crate::runtime::Runtime;

/// What a session serves and where it puts what it receives.
#[derive(Debug, Clone)]
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
    /// This endpoint's origin (hop) id, carried in ANNOUNCE_OK and used to drop looped
    /// announcements; 0 for none.
    pub origin_id: u64,
    /// What reaching a broadcast through this peer costs on top of the cost the peer
    /// announces (moq-lite-06's Route Cost; before -06, where nothing is announced, the
    /// hops behind the peer count one each). Routes rank by total cost, so a relay
    /// prices a link it would rather not use (a slower region, a draining peer) above
    /// the others. 1 by default: cost is hop count.
    pub link_cost: u64,
    /// The largest frame accepted from the peer, in bytes.
    pub max_frame_size: u64,
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
    /// [`SessionCounters::groups_dropped`]). A subscriber that withholds stream or data
    /// credit loses groups, as a slow one would, instead of making the session hold them
    /// all.
    pub max_queued_groups: usize,
    /// The most payload bytes of one group received from the peer; past it the group is
    /// aborted and its stream stopped with [`Error::BoundsExceeded`]
    /// ([`SessionCounters::groups_refused`]), the session going on. A group is cached
    /// whole, so a group that never ends must not grow without bound.
    pub max_group_bytes: u64,
    /// The most frames of one group received from the peer, the same way.
    pub max_group_frames: u64,
    /// The most payload bytes in all the peer's unfinished groups together (a peer may
    /// keep as many group streams open as its stream limit allows); a frame past it
    /// refuses its group the same way.
    pub max_receiving_group_bytes: u64,
    /// Groups kept for late joiners in each track this session receives from the peer
    /// (a relay's cache per upstream track).
    pub cache_groups: usize,
    /// The most payload bytes cached per received track, on top of `cache_groups`
    /// ([`Track::cache_bytes`](crate::model::Track::cache_bytes)); `None` for no byte bound.
    pub cache_bytes: Option<u64>,
    /// The memory budget every session of a relay shares
    /// ([`MemoryBudget`](crate::model::MemoryBudget)): the groups received from the peer
    /// are charged to it, their tracks' caches shed under its pressure, and while it is
    /// full the peer's new subscriptions are refused with [`Error::BoundsExceeded`] and a
    /// received frame that does not fit refuses its group. `None`: no shared bound.
    pub memory_budget: Option<crate::model::MemoryBudget>,
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

/// The hook of [`SessionConfig::authorize`]: the client's SETUP in, the session's origins
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
    /// moq-lite-05, serving and subscribing to nothing, 16 MiB frames, 1 s for trailing
    /// groups, 1 s of linger for unused subscriptions, no authorization hook, 1,000
    /// requests and 16 announce streams served at once, 10,000 announced broadcasts with
    /// 1 MiB of path, 1,024 groups waiting for credit, groups of at most 64 MiB and
    /// 65,536 frames and 256 MiB in unfinished groups together, 32 groups cached per received track and no byte bound, 64 KiB
    /// control messages, a 16 KiB SETUP, 10 s for a client's SETUP, no end of validity,
    /// and the peer's routes trusted.
    fn default() -> Self {
        Self {
            version: Version::Lite05,
            publish: None,
            subscribe: None,
            subscribe_prefix: Path::root(),
            path: None,
            origin_id: 0,
            link_cost: 1,
            max_frame_size: 16 << 20,
            trailing_groups_timeout: std::time::Duration::from_secs(1),
            unused_track_linger: std::time::Duration::from_secs(1),
            authorize: None,
            max_subscriptions: 1000,
            max_announce_requests: 16,
            max_announces: 10_000,
            max_announce_path_bytes: 1 << 20,
            max_queued_groups: 1024,
            max_group_bytes: 64 << 20,
            max_group_frames: 65_536,
            max_receiving_group_bytes: 256 << 20,
            cache_groups: 32,
            cache_bytes: None,
            memory_budget: None,
            max_message_bytes: 64 << 10,
            max_setup_bytes: 16 << 10,
            setup_timeout: std::time::Duration::from_secs(10),
            valid_for: None,
            trust_peer_routes: true,
        }
    }
}

/// What a session did so far, counted by its machine ([`Session::counters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionCounters {
    /// Frames sent to the peer on group streams.
    pub frames_sent: u64,
    /// Their payload bytes.
    pub payload_bytes_sent: u64,
    /// Frames received from the peer on group streams.
    pub frames_received: u64,
    /// Their payload bytes.
    pub payload_bytes_received: u64,
    /// The peer's subscriptions this side served.
    pub subscriptions_served: u64,
    /// The peer's requests (SUBSCRIBE, TRACK, FETCH) refused for
    /// [`SessionConfig::max_subscriptions`].
    pub subscriptions_refused: u64,
    /// The peer's announce streams refused for [`SessionConfig::max_announce_requests`].
    pub announce_requests_refused: u64,
    /// Groups dropped because the peer gave no credit for them: unsent for lack of stream
    /// credit, or reset for lack of data credit ([`SessionConfig::max_queued_groups`]).
    pub groups_dropped: u64,
    /// Groups of the peer's subscriptions this side never reached: the track's cache released
    /// them (a producer running ahead, or caches shed under a [`crate::model::MemoryBudget`])
    /// or they expired before this session sent them.
    pub groups_skipped: u64,
    /// Groups from the peer stopped for [`SessionConfig::max_group_bytes`],
    /// [`SessionConfig::max_group_frames`] or
    /// [`SessionConfig::max_receiving_group_bytes`].
    pub groups_refused: u64,
    /// The peer's subscriptions being served now.
    pub subscriptions_active: u64,
    /// Group streams this side has open and unfinished now.
    pub open_group_streams: u64,
    /// Entries in the session's queue of open group streams (the order in which the
    /// oldest is reset): at most twice `open_group_streams` plus a constant, however long
    /// one group stays open (review finding F2).
    pub open_group_entries: u64,
    /// Subscriptions this side holds to the peer now (one per track local consumers
    /// read, however many they are): a relay's upstream subscriptions over this session.
    pub upstream_subscriptions: u64,
    /// Broadcasts the peer announced to this session and this side published now.
    pub announced_broadcasts: u64,
    /// Announcements sent to the peer: each a broadcast starting, ending, or moving to
    /// another route (what a relay mesh exchanges to converge).
    pub announcements_sent: u64,
}

/// What the handle reads of the machine's counters.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Snapshot {
    pub(crate) transport: crate::transport::TransportStats,
    pub(crate) counters: SessionCounters,
}

/// Which end of the connection a session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// Opened the connection; sends SETUP with the path.
    Client,
    /// Accepted it; serves nothing until the client's SETUP arrives.
    Server,
}

/// A running session. Cloning gives another handle to the same session; dropping every
/// handle does not close it (close it, or drop its transport's connection).
#[derive(Debug, Clone)]
pub struct Session {
    shared: Arc<Shared>,
}

/// What the handle and the machine share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The version the session speaks (fixed for its life).
    version: Version,
    /// Written by the handle (a close or GOAWAY request) and by the machine (the outcome).
    state: moqx_kio::Producer<State>,
    /// The transport's and the machine's counters, refreshed by the machine once per turn
    /// (one lock for both: a turn per message is the chat hot path).
    snapshot: moqx_kio::sync::Mutex<Snapshot>,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    /// The handle asked the machine to close with this error.
    close_requested: Option<Error>,
    /// The handle asked the machine to send GOAWAY with this URI.
    goaway_requested: Option<String>,
    /// The session ended, with this error (`Error::Closed` for a clean close).
    closed: Option<Error>,
    /// The peer's SETUP, once received.
    peer_setup: Option<Setup>,
    /// The URI of the peer's GOAWAY, once received ("" for "the same place, later").
    peer_goaway: Option<String>,
    /// The transport's words for how the connection ended, if it ended on its own.
    transport_closed: Option<String>,
}

/// Starts a client session over `transport`, run by `runtime`.
pub fn connect<R: Runtime>(runtime: R, transport: R::Transport, config: SessionConfig) -> Session {
    start(runtime, transport, config, Side::Client)
}

/// Starts a server session over an accepted `transport`, run by `runtime`.
pub fn accept<R: Runtime>(runtime: R, transport: R::Transport, config: SessionConfig) -> Session {
    start(runtime, transport, config, Side::Server)
}

fn start<R: Runtime>(
    runtime: R,
    transport: R::Transport,
    config: SessionConfig,
    side: Side,
) -> Session {
    let shared = Arc::new(Shared {
        version: config.version,
        state: moqx_kio::Producer::new(State::default()),
        snapshot: moqx_kio::sync::Mutex::new(Snapshot::default()),
    });
    let machine = SessionMachine::new(runtime.clone(), transport, config, side, shared.clone());
    runtime.spawn(machine);
    Session { shared }
}

impl Session {
    /// Closes the session with `error`'s code (use [`Error::Cancel`] for a normal close).
    pub fn close(&self, error: Error) {
        self.shared.state.update(|state| {
            state.close_requested.get_or_insert(error);
        });
    }

    /// Ready with why the session ended.
    pub fn poll_closed(&self, waiter: &Waiter) -> Poll<Error> {
        self.shared
            .state
            .consume()
            .poll_until(waiter, |state| state.closed)
            .map(|result| result.unwrap_or(Error::Closed))
    }

    /// Waits until the session ends, and says why.
    pub async fn closed(&self) -> Error {
        let consumer = self.shared.state.consume();
        consumer
            .until(|state| state.closed)
            .await
            .unwrap_or(Error::Closed)
    }

    /// Ready once the peer's SETUP arrived (the session is established) or the session
    /// ended: the poll form of [`established`](Self::established).
    pub fn poll_established(&self, waiter: &Waiter) -> Poll<Result<Setup, Error>> {
        self.shared
            .state
            .consume()
            .poll_until(waiter, |state| match (&state.peer_setup, state.closed) {
                (Some(setup), _) => Some(Ok(setup.clone())),
                (None, Some(error)) => Some(Err(error)),
                (None, None) => None,
            })
            .map(|result| result.unwrap_or(Err(Error::Closed)))
    }

    /// Waits until the peer's SETUP arrived (the session is established) or the session
    /// ended, and says which. Before -05 there is no SETUP: the session is established
    /// from the start, with an empty one. A server with an [`authorize`](SessionConfig::authorize) hook
    /// sends its SETUP only once the hook accepted the client, so for its clients this is
    /// also "the server let me in".
    pub async fn established(&self) -> Result<Setup, Error> {
        let consumer = self.shared.state.consume();
        consumer
            .until(|state| match (&state.peer_setup, state.closed) {
                (Some(setup), _) => Some(Ok(setup.clone())),
                (None, Some(error)) => Some(Err(error)),
                (None, None) => None,
            })
            .await
            .unwrap_or(Err(Error::Closed))
    }

    /// The moq-lite version the session speaks, as negotiated (ALPN on raw QUIC,
    /// `wt-protocol` on WebTransport).
    pub fn version(&self) -> Version {
        self.shared.version
    }

    /// Whether the session has ended.
    pub fn is_closed(&self) -> bool {
        self.shared.state.borrow().closed.is_some()
    }

    /// Why the session ended (`Error::Closed` for a clean close), once it has: what
    /// [`closed`](Self::closed) returns, without waiting.
    pub fn close_error(&self) -> Option<Error> {
        self.shared.state.borrow().closed
    }

    /// The peer's SETUP, once it arrived.
    pub fn peer_setup(&self) -> Option<Setup> {
        self.shared.state.borrow().peer_setup.clone()
    }

    /// Tells the peer this side is going away (GOAWAY), naming where to reconnect (empty
    /// for "the same place, later"). -03 has no GOAWAY: there, nothing is sent. Streams already open carry on; the peer opens no new
    /// ones. A server sends it on shutdown, then closes after a drain.
    pub fn goaway(&self, uri: &str) {
        self.shared.state.update(|state| {
            state.goaway_requested.get_or_insert_with(|| uri.to_owned());
        });
    }

    /// The peer's GOAWAY, if it sent one: the URI it asks to be reconnected to (empty for
    /// "the same place, later"). The session goes on (streams open carry on, no new ones
    /// start); a client should connect again, and move what it publishes and subscribes
    /// there, before the peer closes the session.
    pub fn peer_goaway(&self) -> Option<String> {
        self.shared.state.borrow().peer_goaway.clone()
    }

    /// Ready with the peer's GOAWAY URI once it sent one, or with why the session ended
    /// if it ended first: the poll form of [`going_away`](Self::going_away).
    pub fn poll_going_away(&self, waiter: &Waiter) -> Poll<Result<String, Error>> {
        self.shared
            .state
            .consume()
            .poll_until(waiter, |state| match (&state.peer_goaway, state.closed) {
                (Some(uri), _) => Some(Ok(uri.clone())),
                (None, Some(error)) => Some(Err(error)),
                (None, None) => None,
            })
            .map(|result| result.unwrap_or(Err(Error::Closed)))
    }

    /// Waits until the peer sends GOAWAY (its URI) or the session ends (why), whichever
    /// comes first.
    pub async fn going_away(&self) -> Result<String, Error> {
        let consumer = self.shared.state.consume();
        consumer
            .until(|state| match (&state.peer_goaway, state.closed) {
                (Some(uri), _) => Some(Ok(uri.clone())),
                (None, Some(error)) => Some(Err(error)),
                (None, None) => None,
            })
            .await
            .unwrap_or(Err(Error::Closed))
    }

    /// How the connection under the session ended, in the transport's words, if it ended
    /// on its own (the peer's close with its reason, an idle timeout, a stateless reset):
    /// more than the code [`closed`](Self::closed) gives, for a log or a status page.
    /// `None` while it is up, and when the session itself closed it.
    pub fn transport_closed(&self) -> Option<String> {
        self.shared.state.borrow().transport_closed.clone()
    }

    /// The transport's counters as of the machine's last turn.
    pub fn stats(&self) -> crate::transport::TransportStats {
        self.shared.snapshot.lock().transport
    }

    /// The session's frame and subscription counters as of the machine's last turn.
    pub fn counters(&self) -> SessionCounters {
        self.shared.snapshot.lock().counters
    }
}

impl AsRef<Session> for Session {
    /// The session itself: what [`Reconnect`](crate::reconnect::Reconnect) keeps up,
    /// when the dialer returns nothing more.
    fn as_ref(&self) -> &Session {
        self
    }
}
