//! moq-lite sessions: the protocol machine between a transport and the model.
//!
//! A session is two halves over one connection:
//!
//! - the **publisher** half serves what [`SessionConfig::publish`] holds: it answers the
//!   peer's announce requests from that [`Origin`](crate::model::Origin), its TRACK requests with TRACK_INFO, and
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
//!
//! The same machine runs IETF moq-transport sessions when [`SessionConfig::version`] is one
//! of its drafts ([`Version::MOQT`]): their control streams, SETUP, GOAWAY and request ids
//! (`moqt` below), and the same model: a relay serves both protocols from one origin.

mod announce;
mod config;
mod context;
mod discover;
mod group_write;
mod machine;
mod moqt;
mod own_wake;
mod publisher;
mod remote;
mod setup;
mod stream;
mod subscriber;
mod task;
mod tasks;

use std::sync::Arc;
use std::task::Poll;

use moqx_kio::Waiter;

pub use config::{Authorize, CachePolicy, Origins, SessionConfig, SessionLimits};
pub use machine::SessionMachine;

use crate::Error;
use crate::coding::{Setup, Version};

use crate::runtime::Runtime;

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
    /// [`SessionLimits::max_subscriptions`].
    pub subscriptions_refused: u64,
    /// The peer's announce streams refused for [`SessionLimits::max_announce_requests`].
    pub announce_requests_refused: u64,
    /// Groups dropped because the peer gave no credit for them: unsent for lack of stream
    /// credit, or reset for lack of data credit ([`SessionLimits::max_queued_groups`]).
    pub groups_dropped: u64,
    /// Groups of the peer's subscriptions this side never reached: the track's cache released
    /// them (a producer running ahead, or caches shed under a [`crate::model::MemoryBudget`])
    /// or they expired before this session sent them.
    pub groups_skipped: u64,
    /// Groups from the peer stopped for [`SessionLimits::max_group_bytes`],
    /// [`SessionLimits::max_group_frames`] or
    /// [`SessionLimits::max_receiving_group_bytes`].
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
    /// The machine's counters, refreshed by it once per turn, and the transport's: read
    /// through [`stats_reader`](Self::stats_reader) while the session runs where the
    /// transport has a reader, else refreshed by the machine too.
    snapshot: moqx_kio::sync::Mutex<Snapshot>,
    /// The transport's counters, read when the handle asks; taken by the machine when the
    /// session ends (with a last reading into the snapshot), so that a handle kept after
    /// the session does not keep its connection.
    stats_reader: moqx_kio::sync::Mutex<Option<crate::transport::StatsReader>>,
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
        stats_reader: moqx_kio::sync::Mutex::new(crate::transport::Session::stats_reader(
            &transport,
        )),
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

    /// The protocol version the session speaks (a moq-lite version or a moq-transport
    /// draft), as negotiated (ALPN on raw QUIC, `wt-protocol` on WebTransport).
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

    /// The transport's counters: read now while the session runs (over a transport that
    /// can be read from any thread: QUIC, WebTransport), else as of the machine's last
    /// turn.
    pub fn stats(&self) -> crate::transport::TransportStats {
        let reader = self.shared.stats_reader.lock().clone();
        match reader {
            Some(reader) => reader.read(),
            None => self.shared.snapshot.lock().transport,
        }
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
