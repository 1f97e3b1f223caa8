//! IETF moq-transport sessions (drafts 14, 16 and 18) on the session machine: the control
//! streams, SETUP and version confirmation, GOAWAY, request-id flow control, and the
//! peer's requests.
//!
//! How each draft lays out its streams (docs/moqt-drafts.md, "Session"):
//!
//! - **14, 16**: the client opens one bidirectional control stream and writes CLIENT_SETUP;
//!   the server answers SERVER_SETUP on it, and every control message after travels on it
//!   (16 alone moves SUBSCRIBE_NAMESPACE to a bidirectional stream of its own). Request
//!   ids are granted with MAX_REQUEST_ID; 14 confirms its version number in SETUP.
//! - **18**: each side opens a unidirectional control stream that starts with SETUP and
//!   then carries only GOAWAY; every request opens a bidirectional stream of its own, and
//!   its reply travels on it. No request-id grants: stream limits bound requests.
//!
//! Either way, the control stream ending, a message out of place, or a request id out of
//! order closes the session with the draft's termination code
//! ([`Termination`](crate::moqt::Termination)).
//!
//! On that, the same model as moq-lite's ([`crate::model`], one origin for both
//! protocols):
//!
//! - the publisher half serves SUBSCRIBE from the published origin (`serve.rs`) and
//!   announces its broadcasts: unsolicited PUBLISH_NAMESPACE from a client publisher, and
//!   in answer to SUBSCRIBE_NAMESPACE (`discovery.rs`);
//! - the subscriber half accepts PUBLISH_NAMESPACE (`namespaces.rs`), asks for namespaces
//!   as a client (SUBSCRIBE_NAMESPACE), subscribes upstream when a local consumer wants a
//!   track (`upstream.rs`) and reads the subgroup streams into groups (`group_read.rs`);
//! - namespaces are broadcast paths split at `/`, objects are frames, subgroup 0 is the
//!   group (`names.rs`, `GroupFormat::Moqt`).
//!
//! TRACK_STATUS is served as a subscription that stops at its answer (`serve.rs`). Not
//! served yet, answered NOT_SUPPORTED with the session going on: FETCH, PUBLISH (a
//! publisher-initiated subscription), SUBSCRIBE_TRACKS, and REQUEST_UPDATE.
//! Object datagrams are not sent or read.

mod control;
mod discovery;
mod group_read;
mod incoming;
mod names;
mod namespaces;
mod rendezvous;
mod request_stream;
mod requests;
mod serve;
mod setup;
mod upstream;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::task::Waker;

use bytes::Bytes;

pub(crate) use control::ControlStream;
pub(crate) use discovery::{
    Announcements, Announcer, NamespaceFollow, NamespaceFollowPlan, Publication, PublicationPlan,
};
pub(crate) use group_read::MoqtGroupRead;
pub(crate) use incoming::{MoqtBidiIncoming, MoqtUniIncoming};
pub(crate) use namespaces::NamespaceStream;
pub(crate) use requests::RequestRefuse;
pub(crate) use serve::{MoqtSubscribeServe, Subscription};
pub(crate) use upstream::{Upstream, UpstreamPlan, subscribe as subscribe_upstream};

use super::{SessionConfig, Side};
use crate::Error;
use crate::moqt::{Control, Draft, GoAway};

/// The stream reset (and STOP_SENDING) code CANCELLED, every draft: what a data stream
/// nobody asked for is stopped with.
pub(crate) const RESET_CANCELLED: u64 = 0x1;

/// Request ids a draft 18 session remembers above the contiguous run it has seen: requests
/// on their own streams may arrive out of order, and a duplicate must still be caught. A
/// peer that leaves gaps past this many has the oldest ones forgotten (treated as seen).
const MAX_PENDING_REQUEST_IDS: usize = 4096;

/// A moq-transport session's own state, beside the [`Context`](super::Context) every
/// sub-machine shares.
pub(crate) struct MoqtState {
    pub(crate) draft: Draft,
    side: Side,
    /// Encoded control messages for this side's control stream, in order: written once
    /// the stream is open, after its SETUP.
    outbox: VecDeque<Bytes>,
    /// The control stream's sub-machine, to wake when the outbox fills.
    outbox_waker: Option<Waker>,
    /// A server on 14 and 16: the client's control stream arrived (a second one is a
    /// protocol violation).
    pub(crate) control_accepted: bool,
    /// 14, 16: the request ids this side may use are below this (the peer's grant).
    pub(crate) peer_max_request_id: u64,
    /// 14, 16: the request ids the peer may use are below this (this side's grant).
    max_request_id: u64,
    /// How many request ids each grant keeps open ahead of the peer.
    request_window: u64,
    /// The peer's requests ended since the last grant, in request ids.
    freed_request_ids: u64,
    /// The request id the peer's next request must carry (14, 16), or the contiguous run
    /// of those seen so far (18: every id below it was seen).
    next_peer_request_id: u64,
    /// 18: the peer's request ids seen above `next_peer_request_id`.
    pending_request_ids: BTreeSet<u64>,
    /// The peer's GOAWAY arrived (a second one is a protocol violation).
    pub(crate) goaway_received: bool,
    /// 14, 16: the peer's subscriptions served, by request id: UNSUBSCRIBE sets the flag
    /// its sub-machine watches.
    served: HashMap<u64, moqx_kio::Producer<bool>>,
    /// The request id of this side's next request (the client's even, the server's odd).
    pub(crate) next_request_id: u64,
    /// This side's subscriptions by the track alias each SUBSCRIBE_OK gave: the request
    /// id, under which its route lives.
    pub(crate) aliases: HashMap<u64, u64>,
    /// Bumped each time one of this side's subscriptions is answered (an alias given) or
    /// ends: what a data stream of an alias not known yet waits on (`group_read.rs`).
    pub(crate) alias_news: moqx_kio::Producer<u64>,
    /// Data streams waiting for their alias now (bounded: `group_read.rs`).
    pub(crate) streams_awaiting_alias: usize,
    /// Sub-machines waiting for a time (a SUBSCRIBE's rendezvous), by request id: when,
    /// and whom to wake then.
    timed: HashMap<u64, (crate::runtime::Instant, Option<Waker>)>,
    /// 14, 16: the namespaces the peer published, by request id, until withdrawn.
    pub(crate) published: HashMap<u64, namespaces::Accepted>,
    /// 14: the peer's SUBSCRIBE_NAMESPACEs answered, by prefix: UNSUBSCRIBE_NAMESPACE
    /// sets the flag their announcer watches.
    namespace_subscriptions: HashMap<crate::moqt::Namespace, moqx_kio::Producer<bool>>,
}

impl MoqtState {
    /// The state of a new session on `draft`; the peer's request-id grant is
    /// `2 × (max_subscriptions + max_announce_requests)` ids, one per request this side is
    /// willing to hold (ids go up by two, one parity per side).
    pub(crate) fn new(draft: Draft, side: Side, config: &SessionConfig) -> Self {
        let requests = config
            .limits
            .max_subscriptions
            .saturating_add(config.limits.max_announce_requests)
            .max(1) as u64;
        let request_window = requests.saturating_mul(2);
        let first_peer_id = match side {
            // The client's requests are even, the server's odd.
            Side::Server => 0,
            Side::Client => 1,
        };
        Self {
            draft,
            side,
            outbox: VecDeque::new(),
            outbox_waker: None,
            control_accepted: false,
            peer_max_request_id: 0,
            max_request_id: first_peer_id + request_window,
            request_window,
            freed_request_ids: 0,
            next_peer_request_id: first_peer_id,
            pending_request_ids: BTreeSet::new(),
            goaway_received: false,
            served: HashMap::new(),
            next_request_id: match side {
                Side::Client => 0,
                Side::Server => 1,
            },
            aliases: HashMap::new(),
            alias_news: moqx_kio::Producer::new(0),
            streams_awaiting_alias: 0,
            timed: HashMap::new(),
            published: HashMap::new(),
            namespace_subscriptions: HashMap::new(),
        }
    }

    /// Whether `until` has come at `now`; if not, request `request_id`'s sub-machine is
    /// woken then (`waker`).
    pub(crate) fn poll_time(
        &mut self,
        request_id: u64,
        until: crate::runtime::Instant,
        now: crate::runtime::Instant,
        waker: Option<Waker>,
    ) -> bool {
        if now >= until {
            self.timed.remove(&request_id);
            return true;
        }
        self.timed.insert(request_id, (until, waker));
        false
    }

    /// Request `request_id`'s timed wait is over early.
    pub(crate) fn forget_time(&mut self, request_id: u64) {
        self.timed.remove(&request_id);
    }

    /// Wakes the timed waits that are due at `now`; the earliest still running.
    pub(crate) fn settle_timed(
        &mut self,
        now: crate::runtime::Instant,
    ) -> Option<crate::runtime::Instant> {
        self.timed.retain(|_, (until, waker)| {
            let due = *until <= now;
            if due && let Some(waker) = waker.take() {
                waker.wake();
            }
            !due
        });
        self.timed.values().map(|(until, _)| *until).min()
    }

    /// Registers the peer's subscription `request_id` (14, 16): what its UNSUBSCRIBE
    /// will set.
    pub(crate) fn watch_unsubscribe(&mut self, request_id: u64) -> moqx_kio::Consumer<bool> {
        let flag = moqx_kio::Producer::new(false);
        let watch = flag.consume();
        self.served.insert(request_id, flag);
        watch
    }

    /// The peer's UNSUBSCRIBE of `request_id`; one for a subscription already over (or
    /// refused) is nothing to act on.
    pub(crate) fn unsubscribe(&mut self, request_id: u64) {
        match self.served.get(&request_id) {
            Some(flag) => flag.update(|unsubscribed| *unsubscribed = true),
            None => tracing::debug!(request_id, "UNSUBSCRIBE of no subscription served"),
        }
    }

    /// The request id of this side's next request, if the peer's grant has one left (14,
    /// 16; on 18 there is always one).
    pub(crate) fn take_own_request_id(&mut self) -> Option<u64> {
        let id = self.next_request_id;
        if self.draft.has_request_id_flow_control() && id >= self.peer_max_request_id {
            tracing::debug!(id, granted = self.peer_max_request_id, "out of request ids");
            let blocked = crate::moqt::RequestsBlocked {
                maximum: self.peer_max_request_id,
            };
            let _ = self.send(&blocked);
            return None;
        }
        self.next_request_id += 2;
        Some(id)
    }

    /// Registers the peer's SUBSCRIBE_NAMESPACE for `prefix` (14): what its
    /// UNSUBSCRIBE_NAMESPACE will set.
    pub(crate) fn watch_unsubscribe_namespace(
        &mut self,
        prefix: &crate::moqt::Namespace,
    ) -> moqx_kio::Consumer<bool> {
        let flag = moqx_kio::Producer::new(false);
        let watch = flag.consume();
        if let Some(replaced) = self.namespace_subscriptions.insert(prefix.clone(), flag) {
            replaced.update(|done| *done = true);
        }
        watch
    }

    /// The peer's UNSUBSCRIBE_NAMESPACE of `prefix` (14).
    pub(crate) fn unsubscribe_namespace(&mut self, prefix: &crate::moqt::Namespace) {
        match self.namespace_subscriptions.remove(prefix) {
            Some(flag) => flag.update(|done| *done = true),
            None => tracing::debug!("UNSUBSCRIBE_NAMESPACE of no prefix followed"),
        }
    }

    /// A subscription ended: forgets it; whether it was registered (14, 16).
    pub(crate) fn forget_subscription(&mut self, request_id: u64) -> bool {
        self.served.remove(&request_id).is_some()
    }

    /// Queues `message` on this side's control stream.
    pub(crate) fn send<C: Control + std::fmt::Debug>(&mut self, message: &C) -> Result<(), Error> {
        tracing::debug!(?message, "control message to the peer");
        let bytes = message.to_vec(self.draft).map_err(|error| {
            tracing::debug!(%error, message = C::NAME, "could not encode a control message");
            Error::Encode
        })?;
        self.queue(Bytes::from(bytes));
        Ok(())
    }

    /// Queues an encoded control message on this side's control stream.
    pub(crate) fn queue(&mut self, message: Bytes) {
        self.outbox.push_back(message);
        if let Some(waker) = self.outbox_waker.take() {
            waker.wake();
        }
    }

    /// Queues GOAWAY: `uri` is where the peer should reconnect (a client names none: a
    /// server refuses one from a client). On 18 it also says which of the peer's requests
    /// were not processed, and sets no timeout.
    pub(crate) fn send_goaway(&mut self, uri: String) -> Result<(), Error> {
        let uri = match self.side {
            Side::Server => uri,
            Side::Client => String::new(),
        };
        let has_timeout = self.draft.has_goaway_timeout();
        let message = GoAway {
            uri,
            timeout: has_timeout.then_some(std::time::Duration::ZERO),
            request_id: has_timeout.then(|| self.first_unprocessed_request_id()),
        };
        self.send(&message)
    }

    /// Takes what the control stream's writer should send, and who to wake when more comes.
    pub(crate) fn take_outbox(&mut self, waker: Option<Waker>) -> VecDeque<Bytes> {
        self.outbox_waker = waker;
        std::mem::take(&mut self.outbox)
    }

    /// The side of this session.
    pub(crate) fn side(&self) -> Side {
        self.side
    }

    /// The request-id grant this side announces in its SETUP (14, 16).
    pub(crate) fn max_request_id(&self) -> u64 {
        self.max_request_id
    }

    /// The smallest of the peer's request ids this side has not processed.
    fn first_unprocessed_request_id(&self) -> u64 {
        self.pending_request_ids
            .last()
            .map_or(self.next_peer_request_id, |last| last + 2)
    }
}

/// What a moq-transport session closes with for `error`, on `draft`.
pub(crate) fn termination_code(error: Error, draft: Draft) -> u64 {
    error.to_termination(draft).code()
}
