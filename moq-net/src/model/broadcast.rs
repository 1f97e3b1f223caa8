//! Broadcasts: named collections of tracks, served up front or on demand.
//!
//! A publisher creates tracks with [`BroadcastProducer::create_track`]. A subscriber asks for
//! a track by name with [`BroadcastConsumer::subscribe_track`] and gets a [`PendingTrack`]
//! that resolves to a [`TrackConsumer`]:
//!
//! - at once, if the track is live;
//! - with [`Error::NotFound`], if it is not and the broadcast was made with
//!   [`BroadcastProducer::new`], or once the producer is gone;
//! - when the producer answers the request, if the broadcast was made with
//!   [`BroadcastProducer::on_demand`]. The producer receives one [`TrackRequest`] per name,
//!   however many subscribers ask at once, and serves it with a [`TrackProducer`] or rejects
//!   it. This is how a relay opens an upstream subscription only when someone downstream
//!   wants the track.
//!
//! The broadcast lists its live tracks without counting as their consumer, so a track's
//! [`TrackProducer::poll_unused`] fires when the last real subscriber leaves, and a track
//! leaves the list when its producer is dropped or finished.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::task::Poll;

use moqx_kio::sync::{Arc, Mutex};
use moqx_kio::{Queue, Waiter};

use super::hook::{DropHook, RouteHook};
use super::route::Route;
use super::track::{Listing, Track, TrackConsumer, TrackProducer, TrackSource};
use crate::Error;

/// Publishes a broadcast's tracks. Dropping it ends the broadcast: consumers see
/// [`BroadcastConsumer::poll_closed`], unanswered requests fail with [`Error::NotFound`], and
/// origins it was published to announce that it ended. Tracks already created live on until
/// their own producers finish.
///
/// ```
/// use moqx_net::model::{BroadcastProducer, Track};
///
/// let broadcast = BroadcastProducer::new();
/// let mut video = broadcast.create_track(Track::new("video"));
/// let subscriber = broadcast.consume();
///
/// let mut group = video.append_group();
/// group.write(0, "keyframe");
/// group.finish();
///
/// pollster::block_on(async {
///     let mut track = subscriber.subscribe_track("video").await.unwrap();
///     let mut group = track.next_group().await.unwrap().unwrap();
///     assert_eq!(group.read_frame().await.unwrap().unwrap().payload, "keyframe");
///
///     // A track nobody created does not exist on a broadcast made with `new`.
///     let missing = subscriber.subscribe_track("audio").await;
///     assert_eq!(missing.err(), Some(moqx_net::Error::NotFound));
/// });
/// ```
#[derive(Debug)]
pub struct BroadcastProducer {
    source: BroadcastSource,
}

/// Subscribes to a broadcast's tracks. Cloning it counts another consumer.
#[derive(Debug, Clone)]
pub struct BroadcastConsumer {
    shared: Arc<BroadcastShared>,
    presence: moqx_kio::Consumer<()>,
}

/// A subscription to a track that may not exist yet: poll it, or `.await` it, for the
/// [`TrackConsumer`] (which starts at the track's latest group when it resolves).
#[derive(Debug)]
#[must_use = "a pending track does nothing unless polled"]
pub struct PendingTrack {
    state: Pending,
    /// The first group the subscriber wants; `None` for the latest.
    start: Option<u64>,
    /// A subscription (it wants groups), not a lookup of the track's properties.
    subscribes: bool,
    /// The waiter of the `Future` implementation.
    waiter: Option<Waiter>,
}

/// A subscriber's request for a track the broadcast does not have: serve it or reject it.
/// Dropping it unanswered rejects it with [`Error::NotFound`].
///
/// ```
/// use moqx_net::model::{BroadcastProducer, Track};
///
/// let broadcast = BroadcastProducer::on_demand();
/// let subscriber = broadcast.consume();
/// let pending = subscriber.subscribe_track("captions");
///
/// pollster::block_on(async {
///     // The producer side (a relay's upstream session, say) sees the request...
///     let request = broadcast.requested_track().await.unwrap();
///     assert_eq!(request.name(), "captions");
///     let mut captions = request.serve(Track::new("captions"));
///
///     // ...and the subscriber gets the track it serves.
///     let mut track = pending.await.unwrap();
///     captions.append_group().write(0, "hello");
///     let mut group = track.next_group().await.unwrap().unwrap();
///     assert_eq!(group.read_frame().await.unwrap().unwrap().payload, "hello");
/// });
/// ```
#[derive(Debug)]
pub struct TrackRequest {
    name: String,
    /// The track's properties, if the subscriber knew them (see
    /// [`BroadcastConsumer::resume_track`]).
    properties: Option<Track>,
    id: u64,
    resolution: moqx_kio::Producer<Option<Resolution>>,
    broadcast: Arc<BroadcastShared>,
    answered: bool,
}

/// Creates consumers of a broadcast without being one: what an origin keeps in its list.
#[derive(Debug, Clone)]
pub(crate) struct BroadcastSource {
    shared: Arc<BroadcastShared>,
    presence: moqx_kio::Producer<()>,
}

#[derive(Debug)]
struct BroadcastShared {
    on_demand: bool,
    state: Mutex<BroadcastState>,
    /// Requests for tracks the broadcast does not have, for the producer to answer.
    requests: Queue<TrackRequest>,
}

#[derive(Debug, Default)]
struct BroadcastState {
    tracks: HashMap<String, Slot>,
    /// How the broadcast got here, and what serving it costs.
    route: Route,
    /// Bumped by every change of `route`.
    route_version: u64,
    /// Run after every change of `route`: the origins it is published in re-rank it.
    on_route: Vec<RouteHook>,
    closed: bool,
    /// Dropped as lost (its session was lost): an origin that lingers keeps its path.
    lost: bool,
    next_request: u64,
    /// Run when the producer drops: origins withdrawing their announcements.
    on_close: Vec<DropHook>,
}

impl BroadcastState {
    /// Removes `source` from the listing if it is still the track listed under `name`;
    /// returns the slot, to be dropped outside the lock.
    fn unlist(&mut self, name: &str, source: &TrackSource) -> Option<Slot> {
        match self.tracks.get(name) {
            Some(Slot::Live(listed)) if listed.same_track(source) => self.tracks.remove(name),
            _ => None,
        }
    }
}

/// What a broadcast knows about one track name.
#[derive(Debug)]
enum Slot {
    Live(TrackSource),
    /// Requested and not answered yet; later subscribers wait on the same answer.
    Requested {
        id: u64,
        resolution: moqx_kio::Producer<Option<Resolution>>,
        /// The earliest group the waiting subscribers want (`None`: the latest), lowered
        /// by each one that asks for an earlier one before the producer subscribes.
        start: Option<u64>,
    },
}

/// What a subscriber asks of a track.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// Its groups, from this one (`None`: the latest).
    Groups(Option<u64>),
    /// Its properties only.
    Properties,
}

impl Want {
    fn start(self) -> Option<u64> {
        match self {
            Want::Groups(start) => start,
            Want::Properties => None,
        }
    }
}

/// The earlier of two starts, `None` being the latest group (after every `Some`).
fn earlier(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// How a request was answered.
#[derive(Debug, Clone)]
enum Resolution {
    Served {
        source: TrackSource,
        /// Counts as a consumer until every waiting subscriber has its own, so the producer
        /// does not see its new track as unused in between.
        _in_use: moqx_kio::Consumer<()>,
    },
    Rejected(Error),
}

#[derive(Debug)]
enum Pending {
    Done(Option<Result<TrackConsumer, Error>>),
    Waiting(moqx_kio::Consumer<Option<Resolution>>),
}

impl BroadcastProducer {
    /// A broadcast whose tracks are the ones its producer creates; asking for any other
    /// fails with [`Error::NotFound`].
    pub fn new() -> Self {
        Self::with_requests(false)
    }

    /// A broadcast that also serves tracks on demand: asking for a track it does not have
    /// queues a [`TrackRequest`] for [`requested_track`](Self::requested_track).
    pub fn on_demand() -> Self {
        Self::with_requests(true)
    }

    fn with_requests(on_demand: bool) -> Self {
        let shared = Arc::new(BroadcastShared {
            on_demand,
            state: Mutex::new(BroadcastState::default()),
            requests: Queue::unbounded(),
        });
        Self {
            source: BroadcastSource {
                shared,
                presence: moqx_kio::Producer::new(()),
            },
        }
    }

    /// Creates a track and lists it under its name, replacing any track listed there before
    /// (whose existing consumers keep reading it). It is unlisted when its producer is
    /// dropped or finished.
    pub fn create_track(&self, track: Track) -> TrackProducer {
        BroadcastShared::create_track(&self.source.shared, track, None)
    }

    /// Records the route this broadcast took to get here: the origin (hop) ids of the
    /// relays it came through, from the original publisher's side, at a cost of one per
    /// hop ([`Route::through`]). Sessions announce it onwards so that relays can refuse
    /// routes that loop through themselves.
    pub fn set_hops(&self, hops: Vec<u64>) {
        self.set_route(Route::through(hops));
    }

    /// Records the route this broadcast took to get here and what serving it costs. The
    /// origins it is published in rank it anew (see [`Route`]): a costlier route can
    /// stop being the one served, and a cheaper one become it.
    pub fn set_route(&self, route: Route) {
        let mut state = self.source.shared.state.lock();
        if state.route == route {
            return;
        }
        state.route = route.clone();
        state.route_version += 1;
        let version = state.route_version;
        let hooks = state.on_route.clone();
        drop(state);
        for hook in hooks {
            hook.call(&route, version);
        }
    }

    /// The route last recorded.
    pub fn route(&self) -> Route {
        self.source.route()
    }

    /// Drops the producer as lost rather than withdrawn: its publisher's session went
    /// away without ending it. An origin that lingers ([`Origin::linger`](super::Origin::linger))
    /// keeps the path announced for a while, for the publisher to come back by some
    /// route; a producer merely dropped is withdrawn at once.
    pub fn drop_as_lost(self) {
        self.source.shared.state.lock().lost = true;
        drop(self);
    }

    /// A consumer of this broadcast.
    pub fn consume(&self) -> BroadcastConsumer {
        self.source.consume()
    }

    /// The next request for a track the broadcast does not have. `Ready(None)` for a
    /// broadcast made with [`new`](Self::new), which never queues requests.
    pub fn poll_requested_track(&self, waiter: &Waiter) -> Poll<Option<TrackRequest>> {
        if !self.source.shared.on_demand {
            return Poll::Ready(None);
        }
        self.source.shared.requests.poll_pop(waiter)
    }

    /// Waits for the next request for a track the broadcast does not have.
    pub async fn requested_track(&self) -> Option<TrackRequest> {
        moqx_kio::wait(|waiter| self.poll_requested_track(waiter)).await
    }

    /// How many consumers exist.
    pub fn consumer_count(&self) -> usize {
        self.source.presence.consumer_count()
    }

    /// Ready when no consumer exists: nobody is subscribed to this broadcast any more.
    pub fn poll_unused(&self, waiter: &Waiter) -> Poll<()> {
        self.source.presence.poll_unused(waiter)
    }

    /// Waits until no consumer exists.
    pub async fn unused(&self) {
        self.source.presence.unused().await
    }

    /// Ready when a consumer exists: someone (a subscriber's session, a relay) is
    /// subscribed to this broadcast.
    pub fn poll_subscribed(&self, waiter: &Waiter) -> Poll<()> {
        self.source.presence.poll_used(waiter)
    }

    /// Waits until someone is subscribed to this broadcast (a consumer exists): the
    /// moment to start producing, for a publisher that produces only on demand.
    pub async fn subscribed(&self) {
        self.source.presence.used().await
    }

    /// What an origin keeps to hand out consumers later.
    pub(crate) fn source(&self) -> BroadcastSource {
        self.source.clone()
    }

    /// Runs `hook` after every change of the broadcast's route.
    pub(crate) fn on_route_change(&self, hook: RouteHook) {
        let mut state = self.source.shared.state.lock();
        if !state.closed {
            state.on_route.push(hook);
        }
    }

    /// Runs `hook` when this producer is dropped.
    pub(crate) fn on_close(&self, hook: DropHook) {
        let mut state = self.source.shared.state.lock();
        if !state.closed {
            state.on_close.push(hook);
            return;
        }
        drop(state);
        drop(hook);
    }
}

impl Default for BroadcastProducer {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for BroadcastProducer {
    fn drop(&mut self) {
        let shared = &self.source.shared;
        let mut state = shared.state.lock();
        state.closed = true;
        let tracks = std::mem::take(&mut state.tracks);
        let hooks = std::mem::take(&mut state.on_close);
        state.on_route.clear();
        drop(state);
        // Everything below runs outside the lock: answering requests wakes subscribers, and
        // hooks lock their origins.
        shared.requests.close();
        while let Ok(request) = shared.requests.try_pop() {
            drop(request); // rejects with NotFound
        }
        for slot in tracks.into_values() {
            if let Slot::Requested { resolution, .. } = slot {
                resolution
                    .write()
                    .get_or_insert(Resolution::Rejected(Error::NotFound));
            }
        }
        drop(hooks);
        self.source.presence.close();
    }
}

impl BroadcastConsumer {
    /// Subscribes to the track `name`. The [`PendingTrack`] resolves:
    ///
    /// - at once, if the track is live;
    /// - with [`Error::NotFound`], if it is not and the broadcast was made with
    ///   [`BroadcastProducer::new`], or once the producer is gone;
    /// - when the producer answers the [`TrackRequest`], if the broadcast was made with
    ///   [`BroadcastProducer::on_demand`]. Subscribers asking for the same track before the
    ///   answer share one request.
    pub fn subscribe_track(&self, name: &str) -> PendingTrack {
        BroadcastShared::subscribe_track(&self.shared, name, Want::Groups(None), None)
    }

    /// Looks the track `name` up for its properties only, as
    /// [`subscribe_track`](Self::subscribe_track) finds it, without asking for its
    /// groups: an on-demand track's producer subscribes upstream only once a
    /// subscription wants them ([`TrackProducer::poll_wanted`]). What a relay answering
    /// a TRACK query uses.
    pub fn track_info(&self, name: &str) -> PendingTrack {
        BroadcastShared::subscribe_track(&self.shared, name, Want::Properties, None)
    }

    /// [`subscribe_track`](Self::subscribe_track), starting at group `start` (or the
    /// oldest one still cached after it) instead of the latest. An on-demand request
    /// asks its producer for groups from `start` ([`TrackRequest::start`]).
    pub fn subscribe_track_from(&self, name: &str, start: u64) -> PendingTrack {
        BroadcastShared::subscribe_track(&self.shared, name, Want::Groups(Some(start)), None)
    }

    /// Subscribes to the track `properties` describes from group `start`, as
    /// [`subscribe_track_from`](Self::subscribe_track_from), telling an on-demand
    /// producer the track's properties ([`TrackRequest::properties`]): how a subscription
    /// moved to another route of the same publisher carries on at its first missing
    /// group, without a round trip to ask for what it already knows.
    pub fn resume_track(&self, properties: &Track, start: u64) -> PendingTrack {
        BroadcastShared::subscribe_track(
            &self.shared,
            &properties.name,
            Want::Groups(Some(start)),
            Some(properties.clone()),
        )
    }

    /// Whether the producer is gone.
    pub fn is_closed(&self) -> bool {
        self.presence.is_closed()
    }

    /// Ready once the producer is gone.
    pub fn poll_closed(&self, waiter: &Waiter) -> Poll<()> {
        self.presence.poll_closed(waiter)
    }

    /// Waits until the producer is gone.
    pub async fn closed(&self) {
        self.presence.closed().await
    }

    /// The route the broadcast took to get here (see [`BroadcastProducer::set_hops`]); empty
    /// for a broadcast published locally.
    pub fn hops(&self) -> Vec<u64> {
        self.shared.state.lock().route.hops.clone()
    }

    /// The route the broadcast took to get here, and what serving it costs (see
    /// [`BroadcastProducer::set_route`]).
    pub fn route(&self) -> Route {
        self.shared.state.lock().route.clone()
    }

    /// Whether both consumers read the same broadcast.
    pub fn same_broadcast(&self, other: &BroadcastConsumer) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

impl PendingTrack {
    /// The track once it resolves. After `Ready`, polling again returns
    /// [`Error::Cancel`].
    pub fn poll_track(&mut self, waiter: &Waiter) -> Poll<Result<TrackConsumer, Error>> {
        let resolution = match &mut self.state {
            Pending::Done(result) => {
                return Poll::Ready(result.take().unwrap_or(Err(Error::Cancel)));
            }
            Pending::Waiting(cell) => match cell.poll_until(waiter, |value| value.clone()) {
                Poll::Pending => return Poll::Pending,
                // The request's producer always answers before it goes away.
                Poll::Ready(answer) => answer.unwrap_or(Resolution::Rejected(Error::NotFound)),
            },
        };
        self.state = Pending::Done(None);
        Poll::Ready(match resolution {
            Resolution::Served { source, .. } => {
                if self.subscribes {
                    source.mark_wanted(self.start);
                }
                Ok(match self.start {
                    Some(start) => source.consume_from(start),
                    None => source.consume(),
                })
            }
            Resolution::Rejected(error) => Err(error),
        })
    }

    fn done(result: Result<TrackConsumer, Error>) -> Self {
        Self {
            state: Pending::Done(Some(result)),
            start: None,
            subscribes: false,
            waiter: None,
        }
    }

    fn waiting(answer: moqx_kio::Consumer<Option<Resolution>>, want: Want) -> Self {
        Self {
            state: Pending::Waiting(answer),
            start: want.start(),
            subscribes: matches!(want, Want::Groups(_)),
            waiter: None,
        }
    }
}

impl std::future::Future for PendingTrack {
    type Output = Result<TrackConsumer, Error>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let waiter = match this.waiter.take() {
            Some(waiter) => {
                waiter.set_waker(cx.waker());
                waiter
            }
            None => Waiter::new(cx.waker()),
        };
        let result = this.poll_track(&waiter);
        this.waiter = Some(waiter);
        result
    }
}

impl TrackRequest {
    /// The requested track's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The earliest group the waiting subscribers want, if older than the latest (a
    /// subscription moved from another route, resuming at its first missing group);
    /// `None` for the latest. Read it when subscribing: a subscriber asking meanwhile can
    /// lower it.
    pub fn start(&self) -> Option<u64> {
        match self.broadcast.state.lock().tracks.get(&self.name) {
            Some(Slot::Requested { id, start, .. }) if *id == self.id => *start,
            _ => None,
        }
    }

    /// The track's properties, if the subscriber who asked knew them (it read the track
    /// by another route): a producer may subscribe at once instead of asking for them.
    pub fn properties(&self) -> Option<&Track> {
        self.properties.as_ref()
    }

    /// How many subscribers are still waiting for the answer. Zero means everyone who asked
    /// gave up; serving the track then only creates a track nobody uses.
    pub fn waiting(&self) -> usize {
        self.resolution.consumer_count()
    }

    /// Creates the track (under the requested name, whatever `track.name` says), lists it,
    /// and hands it to every waiting subscriber.
    pub fn serve(mut self, mut track: Track) -> TrackProducer {
        track.name = std::mem::take(&mut self.name);
        let producer = BroadcastShared::create_track(&self.broadcast, track, Some(self.id));
        let source = producer.source();
        let in_use = source.hold();
        self.answer(Resolution::Served {
            source,
            _in_use: in_use,
        });
        producer
    }

    /// Rejects the request: waiting subscribers get `error`.
    pub fn reject(mut self, error: Error) {
        self.unlist();
        self.answer(Resolution::Rejected(error));
    }

    fn answer(&mut self, resolution: Resolution) {
        self.answered = true;
        *self.resolution.write() = Some(resolution);
    }

    /// Removes this request from the broadcast's list, if it is still the one listed.
    fn unlist(&self) {
        let mut state = self.broadcast.state.lock();
        if let Some(Slot::Requested { id, .. }) = state.tracks.get(&self.name)
            && *id == self.id
        {
            state.tracks.remove(&self.name);
        }
    }
}

impl Drop for TrackRequest {
    fn drop(&mut self) {
        if !self.answered {
            self.unlist();
            self.answer(Resolution::Rejected(Error::NotFound));
        }
    }
}

impl BroadcastSource {
    /// A counted consumer of the broadcast.
    pub(crate) fn consume(&self) -> BroadcastConsumer {
        BroadcastConsumer {
            shared: self.shared.clone(),
            presence: self.presence.consume(),
        }
    }

    /// Whether its producer was dropped as lost ([`BroadcastProducer::drop_as_lost`]).
    pub(crate) fn is_lost(&self) -> bool {
        self.shared.state.lock().lost
    }

    /// The broadcast's route (see [`BroadcastProducer::set_route`]).
    pub(crate) fn route(&self) -> Route {
        self.shared.state.lock().route.clone()
    }

    /// The broadcast's route and how many times it changed.
    pub(crate) fn versioned_route(&self) -> (Route, u64) {
        let state = self.shared.state.lock();
        (state.route.clone(), state.route_version)
    }

    /// Whether both sources are the same broadcast.
    pub(crate) fn same_broadcast(&self, other: &BroadcastSource) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

impl BroadcastShared {
    /// Creates and lists a track. `request` is the id of the request it answers: the slot is
    /// replaced only if it still holds that request or a live track (never a newer request).
    fn create_track(this: &Arc<Self>, track: Track, request: Option<u64>) -> TrackProducer {
        let name = track.name.clone();
        let mut producer = TrackProducer::new(track);
        let source = producer.source();
        let mut state = this.state.lock();
        if state.closed {
            // Nobody can subscribe any more; the track still works for whoever holds it.
            return producer;
        }
        let replaced = match state.tracks.entry(name.clone()) {
            Entry::Vacant(vacant) => {
                vacant.insert(Slot::Live(source.clone()));
                None
            }
            Entry::Occupied(mut occupied) => {
                let keep_newer_request = matches!(
                    occupied.get(),
                    Slot::Requested { id, .. } if request.is_some_and(|r| r != *id)
                );
                if keep_newer_request {
                    None
                } else {
                    Some(occupied.insert(Slot::Live(source.clone())))
                }
            }
        };
        drop(state);
        drop(replaced);

        // Strong references: the listing lives only as long as the track's producer.
        let retire = {
            let (broadcast, name, source) = (this.clone(), name.clone(), source.clone());
            move || {
                let mut state = broadcast.state.lock();
                // Consumers are handed out under this lock: nobody can take one between
                // the count and the removal.
                if source.consumer_count() > 0 {
                    return false;
                }
                let removed = state.unlist(&name, &source);
                drop(state);
                drop(removed);
                true
            }
        };
        let broadcast = this.clone();
        producer.set_listing(Listing {
            retire_if_unused: Box::new(retire),
            on_drop: DropHook::new(move || {
                let mut state = broadcast.state.lock();
                let removed = state.unlist(&name, &source);
                drop(state);
                drop(removed);
            }),
        });
        producer
    }

    fn subscribe_track(
        this: &Arc<Self>,
        name: &str,
        want: Want,
        properties: Option<Track>,
    ) -> PendingTrack {
        let start = want.start();
        let mut state = this.state.lock();
        if state.closed {
            return PendingTrack::done(Err(Error::NotFound));
        }
        match state.tracks.get_mut(name) {
            Some(Slot::Live(source)) => {
                // Under the lock, so that `retire_if_unused` sees this consumer or the
                // track is no longer listed.
                let consumer = match start {
                    Some(start) => source.consume_from(start),
                    None => source.consume(),
                };
                if let Want::Groups(start) = want {
                    source.mark_wanted(start);
                }
                drop(state);
                return PendingTrack::done(Ok(consumer));
            }
            Some(Slot::Requested {
                resolution,
                start: wanted,
                ..
            }) => {
                let pending = PendingTrack::waiting(resolution.consume(), want);
                *wanted = earlier(*wanted, start);
                return pending;
            }
            None if !this.on_demand => return PendingTrack::done(Err(Error::NotFound)),
            None => {}
        }
        let id = state.next_request;
        state.next_request += 1;
        let resolution = moqx_kio::Producer::new(None);
        let pending = PendingTrack::waiting(resolution.consume(), want);
        state.tracks.insert(
            name.to_owned(),
            Slot::Requested {
                id,
                resolution: resolution.clone(),
                start,
            },
        );
        drop(state);
        let request = TrackRequest {
            name: name.to_owned(),
            properties,
            id,
            resolution,
            broadcast: this.clone(),
            answered: false,
        };
        // Pushed outside the lock. If the producer dropped in between, the queue is closed,
        // the push fails, and dropping the request rejects it with NotFound.
        drop(this.requests.try_push(request));
        pending
    }
}

#[cfg(test)]
#[path = "broadcast_tests.rs"]
mod tests;
