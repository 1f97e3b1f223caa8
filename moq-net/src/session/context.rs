//! What every sub-machine of a session may read and change: the session's configuration
//! and counters, the streams to open, the peer's broadcasts, and where each subscription's
//! groups go (with the waits: trailing groups, lingering tracks).

use std::collections::VecDeque;
use std::task::Waker;

use super::SessionConfig;
use super::Side;
use super::remote::RemoteBroadcasts;
use super::task::{Open, Spawn};
use crate::Error;
use crate::coding::{Setup, Version};
use crate::id_map::IdMap;
use crate::model::TrackProducer;
use crate::runtime::Instant;

/// What every sub-machine may read and change. The machine owns it and lends it to one
/// sub-machine at a time.
pub(crate) struct Context {
    pub(crate) version: Version,
    pub(crate) side: Side,
    pub(crate) config: SessionConfig,
    /// The client's SETUP arrived (a server serves nothing before).
    pub(crate) setup_received: bool,
    /// Streams sub-machines asked to open, in order.
    pub(crate) opens: VecDeque<Open>,
    /// Subscriber half: the peer's announced broadcasts.
    pub(crate) remote: RemoteBroadcasts,
    /// Subscriber half: where each subscription's groups go, by subscribe id.
    pub(crate) routes: IdMap<Route>,
    /// The time of this turn of the machine (read once per turn).
    pub(crate) now: Instant,
    pub(crate) next_subscribe_id: u64,
    /// Sub-machines started by other sub-machines (not needing a new stream).
    pub(crate) spawned: Vec<Spawn>,
    /// The peer sent GOAWAY: open no new streams.
    pub(crate) goaway: bool,
    /// Where the peer's GOAWAY asks to reconnect to ("": the same place), once read and
    /// until the handle is told.
    pub(crate) goaway_uri: Option<String>,
    /// The peer's routes were priced out after its GOAWAY.
    pub(crate) routes_priced_out: bool,
    /// Something changed what the machine's own sources may yield (the client's SETUP
    /// arrived, so bidi streams may now be accepted): poll them again this turn.
    pub(crate) sources_changed: bool,
    pub(crate) peer_setup: Option<Setup>,
    /// The origin id in the peer's SETUP (0 for none): on -06, the hop an announce stream
    /// leaves out in place of the request's Exclude Hop.
    pub(crate) peer_origin: u64,
    /// The instant receive times are counted from: on versions whose frames carry no
    /// timestamp (before -05) a frame is stamped with the milliseconds since then at which
    /// it arrived, as deployed peers stamp theirs with their clock.
    pub(crate) epoch: Instant,
    /// A server's authorization hook refused the client before the session began (on a
    /// version without SETUP, the hook runs at once): the machine closes with this.
    pub(crate) refused: Option<Error>,
    /// What the session did, published to the handle once per turn.
    pub(crate) counters: super::SessionCounters,
    /// The peer's requests (SUBSCRIBE, TRACK, FETCH) being served now (against
    /// `max_subscriptions`).
    pub(crate) subscriptions: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// When the session's authorization ends (it closes with Unauthorized).
    pub(crate) expires_at: Option<Instant>,
    /// Payload bytes in received groups not yet finished (against
    /// `max_receiving_group_bytes`).
    pub(crate) receiving_group_bytes: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The peer's announce streams being served now (against `max_announce_requests`).
    pub(crate) announce_requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// A moq-transport session's own state; `None` on moq-lite.
    pub(crate) moqt: Option<super::moqt::MoqtState>,
}

/// Where one subscription's group streams go.
pub(crate) struct Route {
    pub(crate) track: TrackProducer,
    /// Groups that arrived so far.
    pub(crate) arrived: u64,
    /// Set once the publisher ended the subscription: its last groups may still be in
    /// flight on their own streams.
    pub(crate) ending: Option<Ending>,
    /// Set while the track has no local consumer: when the subscription gets cancelled
    /// unless a consumer comes back.
    pub(crate) linger: Option<Linger>,
}

/// A subscription's wait before it cancels a track nobody reads.
pub(crate) struct Linger {
    /// When the wait is over.
    pub(crate) until: Instant,
    /// The subscription's sub-machine, to wake once the wait is over: taken when woken, so
    /// that it is woken once. Woken on every pass, a sub-machine that had ended kept the
    /// machine's loop going forever within one turn.
    pub(crate) wake: Option<Waker>,
}

/// A subscription the publisher ended, waiting for its trailing groups.
pub(crate) struct Ending {
    /// How many groups the publisher served in all (SUBSCRIBE_START to SUBSCRIBE_END).
    pub(crate) expected: u64,
    /// Finish the track by then even if some never arrive.
    pub(crate) until: Instant,
}

impl Route {
    pub(crate) fn new(track: TrackProducer) -> Self {
        Self {
            track,
            arrived: 0,
            ending: None,
            linger: None,
        }
    }

    /// Whether every group the publisher served has arrived.
    pub(crate) fn complete(&self) -> bool {
        self.ending
            .as_ref()
            .is_some_and(|ending| self.arrived >= ending.expected)
    }
}

impl Context {
    /// Ready once subscription `id`'s track has had no local consumer for the session's
    /// linger and was retired: the caller cancels the subscription upstream. A consumer
    /// that comes back meanwhile keeps it; the machine wakes the caller when the wait is
    /// over (`settle_routes`). Pending for a route that is gone.
    pub(crate) fn poll_route_unused(
        &mut self,
        id: u64,
        waiter: &moqx_kio::Waiter,
    ) -> std::task::Poll<()> {
        let now = self.now;
        let linger_for = self.config.unused_track_linger;
        let Some(route) = self.routes.get_mut(&id) else {
            return std::task::Poll::Pending;
        };
        loop {
            if route.track.poll_unused(waiter).is_pending() {
                route.linger = None;
                return std::task::Poll::Pending;
            }
            let until = match &route.linger {
                Some(linger) => linger.until,
                None => {
                    let until = now + linger_for;
                    route.linger = Some(Linger {
                        until,
                        wake: waiter.waker(),
                    });
                    until
                }
            };
            if now < until {
                return std::task::Poll::Pending;
            }
            // Only once retired: a subscriber may have taken the listed track just now,
            // and then the subscription goes on.
            if route.track.retire_if_unused() {
                return std::task::Poll::Ready(());
            }
            route.linger = None;
        }
    }

    /// After the peer's GOAWAY: its routes become the costliest there are, so that every
    /// other route to its broadcasts is preferred and subscriptions move to them at a
    /// group boundary, while the ones only it serves stay served until it leaves.
    pub(crate) fn price_out_routes(&mut self) {
        self.routes_priced_out = true;
        let mut count = 0;
        for remote in self.remote.iter() {
            let mut route = remote.broadcast.route();
            route.cost = u64::MAX;
            remote.broadcast.set_route(route);
            count += 1;
        }
        tracing::debug!(
            routes = count,
            "the peer is going away: its routes priced out"
        );
    }

    /// Wakes the moq-transport sub-machines whose time came; the earliest still to come.
    pub(crate) fn settle_timed(&mut self) -> Option<Instant> {
        let now = self.now;
        self.moqt.as_mut().and_then(|moqt| moqt.settle_timed(now))
    }

    /// Finishes the tracks of ended subscriptions whose groups all arrived or whose wait
    /// is over, wakes the subscriptions whose linger is over; returns the earliest wait
    /// still running.
    pub(crate) fn settle_routes(&mut self) -> Option<Instant> {
        if self
            .routes
            .values()
            .all(|route| route.ending.is_none() && route.linger.is_none())
        {
            return None;
        }
        let now = self.now;
        let done: Vec<u64> = self
            .routes
            .iter()
            .filter(|(_, route)| {
                route.complete() || route.ending.as_ref().is_some_and(|e| e.until <= now)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in done {
            if let Some(route) = self.routes.remove(&id) {
                route.track.finish();
            }
        }
        // Lingers that are over: their sub-machines decide (cancel, or go on), each woken
        // once.
        for route in self.routes.values_mut() {
            if let Some(linger) = &mut route.linger
                && linger.until <= now
                && let Some(wake) = linger.wake.take()
            {
                wake.wake();
            }
        }
        self.routes
            .values()
            .flat_map(|route| {
                let ending = route.ending.as_ref().map(|ending| ending.until);
                let linger = route.linger.as_ref().map(|linger| linger.until);
                [ending, linger.filter(|until| *until > now)]
            })
            .flatten()
            .min()
    }
}
