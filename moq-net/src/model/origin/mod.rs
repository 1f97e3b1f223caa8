//! Origins: broadcasts published by path, discovered by prefix.
//!
//! An [`Origin`] is the directory a relay shares between all of its sessions: a publishing
//! session puts the broadcasts it receives there, and every subscribing session discovers
//! them through [`Origin::announced`], a live stream of [`Announcement`]s for one prefix that
//! starts with a snapshot of what is already active. A broadcast is withdrawn automatically
//! when its [`BroadcastProducer`] is dropped.
//!
//! Several producers may publish the same path (a publisher reconnecting while its old
//! session times out, or several routes to one broadcast across a mesh of relays). They
//! are ranked by their [`Route`]s (cost, then hops, then a hash all relays agree on, then
//! the newest; see [`route`](super::route)), and the best is active; if it goes away, or
//! its route gets worse, the next one becomes active, announced as a fresh
//! [`Announcement::Active`]. [`Announcement::Ended`] comes only when no publisher is left.
//! A listener for a peer relay ([`Origin::announced_excluding`]) is shown the best route
//! that does not pass through that peer.
//!
//! **Lingering** ([`Origin::linger`]): a relay can keep a path whose last publication
//! went (its session was lost) announced for a while, so that a publisher that comes back
//! soon, by any route, is taken in place: subscriptions that follow the path
//! ([`FollowedTrack`](super::FollowedTrack)) wait for it and carry on at their first
//! missing group, and no peer hears the path end and start again. The origin keeps no
//! clock: whoever holds the [`Lingering`] handle ends each path when its time is up.
//!
//! Announcements are queued per listener under the origin's lock, so that every listener sees
//! every path's changes in the order they happened; publishing costs one queue push per
//! listener whose prefix matches. A listener's queue holds at most one change per path:
//! while a change waits, a newer one of the same path replaces it (see
//! [`PendingAnnouncements`]), so a listener that stops reading holds the origin's size in
//! changes, not its history. Frames never go through here.

mod linger;

pub use linger::{Lingering, LingeringPath};

use std::collections::BTreeMap;
use std::task::Poll;

use moqx_kio::Waiter;
use moqx_kio::sync::{Arc, Mutex};

use super::broadcast::{BroadcastConsumer, BroadcastProducer, BroadcastSource};
use super::budget::MemoryBudget;
use super::hook::{DropHook, RouteHook};
use super::path::Path;
use super::pending::PendingAnnouncements;
use super::publications::{Best, Publication, Publications};
use super::route::Route;
use super::scope::Scope;
use crate::Error;

/// Broadcasts by path. Cloning gives another handle to the same origin.
///
/// ```
/// use moqx_net::model::{Announcement, BroadcastProducer, Origin};
///
/// let origin = Origin::new();
/// let alice = BroadcastProducer::new();
/// origin.publish("room/alice", &alice).unwrap();
///
/// let mut room = origin.announced("room");
/// assert_eq!(room.initial_len(), 1, "alice was already live");
///
/// let bob = BroadcastProducer::new();
/// origin.publish("room/bob", &bob).unwrap();
///
/// pollster::block_on(async {
///     let mut next = async || match room.next().await {
///         Announcement::Active { path, .. } => format!("+{path}"),
///         Announcement::Ended { path } => format!("-{path}"),
///     };
///     assert_eq!(next().await, "+room/alice");
///     assert_eq!(next().await, "+room/bob");
///     drop(alice); // unpublished automatically
///     assert_eq!(next().await, "-room/alice");
/// });
/// assert!(origin.consume_broadcast("room/bob").is_some());
/// assert!(origin.consume_broadcast("room/alice").is_none());
/// ```
///
/// A [scoped](Origin::scope) view sees only part of the origin, with paths relative to its
/// root: what a relay hands a session whose token allows only some paths.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    pub(super) shared: Arc<OriginShared>,
    /// `None` for the whole origin.
    scope: Option<Arc<Scope>>,
}

/// A live stream of announcements for the broadcasts under one prefix. It starts with an
/// [`Announcement::Active`] for every broadcast active when it was created
/// ([`initial_len`](Self::initial_len) of them), then follows every change.
#[derive(Debug)]
pub struct Announced {
    origin: Arc<OriginShared>,
    id: u64,
    /// Relative to the view it was made from.
    prefix: Path,
    events: Arc<PendingAnnouncements>,
    initial: usize,
    /// The view's scope, to make event paths relative to it.
    scope: Option<Arc<Scope>>,
}

/// What an origin's announcement listeners hold: see [`Origin::listener_stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListenerStats {
    /// Live [`Announced`] streams.
    pub listeners: usize,
    /// Changes queued for them and not yet read.
    pub waiting_changes: usize,
}

/// A change in what an origin publishes under a prefix.
#[derive(Debug, Clone)]
pub enum Announcement {
    /// `path` is now served by `broadcast`. If the path was already active, this broadcast
    /// replaces the previous one there.
    Active {
        /// The full path of the broadcast.
        path: Path,
        /// A consumer of the broadcast now active at `path`.
        broadcast: BroadcastConsumer,
    },
    /// Nothing is published at `path` any more.
    Ended {
        /// The full path of the broadcast.
        path: Path,
    },
}

#[derive(Debug, Default)]
pub(super) struct OriginShared {
    pub(super) state: Mutex<OriginState>,
    /// What the announcements waiting for listeners are charged to.
    memory: Option<MemoryBudget>,
}

#[derive(Debug, Default)]
pub(super) struct OriginState {
    /// Every path with a live publication, and the lingering ones.
    pub(super) broadcasts: BTreeMap<Path, PathState>,
    pub(super) listeners: Vec<Listener>,
    pub(super) next_id: u64,
    /// While lingering is on ([`Origin::linger`]): where paths that lost their last
    /// publication go, for the handle's holder to end.
    pub(super) linger: Option<Arc<moqx_kio::Queue<LingeringPath>>>,
    /// Paths lingering now (in `broadcasts`, with no publication).
    pub(super) lingering_paths: usize,
    /// A path that began lingering in the last change, to queue once the lock is released.
    pub(super) began_lingering: Option<LingeringPath>,
    /// The change under way removes a publication that was lost: its path may linger.
    pub(super) removing_lost: bool,
}

/// One path's publications, and who follows changes to them.
#[derive(Debug, Default)]
pub(super) struct PathState {
    /// Set while the path lingers with no publication: its ticket.
    pub(super) lingering: Option<u64>,
    pub(super) publications: Publications,
    /// Counts the changes to the path's publications, for the tracks following it
    /// ([`Origin::route_changes`]); made when the first one asks. Dropped with the path,
    /// which its followers see as closed.
    changes: Option<ChangeCount>,
}

#[derive(Debug)]
pub(super) struct Listener {
    pub(super) id: u64,
    /// Absolute.
    pub(super) prefix: Path,
    pub(super) events: Arc<PendingAnnouncements>,
    /// Set when the listener's view allows only part of its prefix: events for paths
    /// outside it are not queued.
    pub(super) filter: Option<Arc<Scope>>,
    /// The hop id of the peer it serves: it is shown the best route not through it
    /// (0: the best route).
    pub(super) exclude: u64,
}

/// A path's change count, in a cell to wait on and an atomic to read without a lock.
#[derive(Debug)]
struct ChangeCount {
    cell: moqx_kio::Producer<u64>,
    count: Arc<std::sync::atomic::AtomicU64>,
}

/// The changes to the publications at one path ([`Origin::route_changes`]): a count that a
/// reader checks without a lock on every group it reads, and waits on only when it has
/// nothing else to wait for.
#[derive(Debug, Clone)]
pub struct RouteChanges {
    cell: moqx_kio::Consumer<u64>,
    count: Arc<std::sync::atomic::AtomicU64>,
}

impl RouteChanges {
    /// How many changes so far (no lock: an atomic load).
    pub fn count(&self) -> u64 {
        self.count.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Ready with the count once it differs from `seen`; `Err` once nothing is published
    /// at the path any more.
    pub fn poll_changed(&self, waiter: &Waiter, seen: u64) -> Poll<Result<u64, moqx_kio::Closed>> {
        self.cell
            .poll_until(waiter, |count| (*count != seen).then_some(*count))
    }
}

/// One listener view of a path being changed: the best route for an exclusion, before
/// and after.
struct View {
    exclude: u64,
    before: Best,
}

impl Listener {
    pub(super) fn wants(&self, path: &Path) -> bool {
        path.has_prefix(&self.prefix) && self.filter.as_ref().is_none_or(|s| s.allows(path))
    }
}

impl Origin {
    /// An empty origin.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty origin whose listeners charge the announcements waiting for them to
    /// `memory` (a relay's [`MemoryBudget`]).
    pub fn with_memory_budget(memory: MemoryBudget) -> Self {
        Self {
            shared: Arc::new(OriginShared {
                state: Mutex::default(),
                memory: Some(memory),
            }),
            scope: None,
        }
    }

    /// Publishes `broadcast` at `path` (normalized) until its producer is dropped. Publishing
    /// the same broadcast at the same path again does nothing.
    ///
    /// Fails with [`Error::Unauthorized`] only on a [scoped](Origin::scope) view, for a path
    /// outside what it allows; the whole origin takes any path.
    ///
    /// When several broadcasts are published at one path, the active one has the best
    /// route ([`BroadcastProducer::set_route`], read now and at every change): a
    /// reconnecting publisher replaces its stale session, and a relay in a mesh keeps the
    /// cheapest route instead of flapping between routes that came around.
    pub fn publish(
        &self,
        path: impl Into<Path>,
        broadcast: &BroadcastProducer,
    ) -> Result<(), Error> {
        let path = self.absolute(path.into());
        if !self.allows_absolute(&path) {
            return Err(Error::Unauthorized);
        }
        let source = broadcast.source();
        let held = |state: &OriginState| {
            state
                .broadcasts
                .get(&path)
                .is_some_and(|entry| entry.publications.holds(&source))
        };
        let mut state = self.shared.state.lock();
        if held(&state) {
            return Ok(());
        }
        let id = state.next_id;
        state.next_id += 1;
        drop(state);
        // Strong references: the hooks live only until the broadcast's producer drops.
        // The route is read after its hook is in place, so that no change falls between.
        let origin = self.shared.clone();
        let at = path.clone();
        broadcast.on_route_change(RouteHook::new(move |route: &Route, version| {
            origin.reroute(&at, id, route, version)
        }));
        let (route, version) = source.versioned_route();
        let mut state = self.shared.state.lock();
        if held(&state) {
            return Ok(()); // published there by another thread meanwhile
        }
        let publication = Publication::new(id, path.as_str(), route, version, source.clone());
        state.change(&path, |publications| {
            publications.insert(publication);
            None::<()>
        });
        drop(state);
        let origin = self.shared.clone();
        broadcast.on_close(DropHook::new(move || origin.unpublish(&path, id)));
        Ok(())
    }

    /// A consumer of the broadcast active at `path`, if any (and if this view may see it).
    pub fn consume_broadcast(&self, path: impl Into<Path>) -> Option<BroadcastConsumer> {
        self.consume_broadcast_excluding(path, 0)
    }

    /// A consumer of the best broadcast at `path` whose route does not pass through the
    /// relay `exclude` (see [`Route::passes_through`]; 0 excludes nothing): what a relay
    /// serves a peer's subscription from, so that no subscription goes round in a circle.
    pub fn consume_broadcast_excluding(
        &self,
        path: impl Into<Path>,
        exclude: u64,
    ) -> Option<BroadcastConsumer> {
        let path = self.absolute(path.into());
        if !self.allows_absolute(&path) {
            return None;
        }
        let state = self.shared.state.lock();
        let entry = state.broadcasts.get(&path)?;
        entry
            .publications
            .best(exclude)
            .map(|best| best.broadcast.consume())
    }

    /// Subscribes to the track `name` of the broadcast at `path` (waiting for it to be
    /// announced), following it across routes for as long as the subscriber reads: if
    /// the route it reads from fails (a relay restarted, a session lost), the track
    /// carries on from its first missing group once a route of the same publisher is
    /// back (see [`FollowedTrack`](super::FollowedTrack)). What an application
    /// subscribing through a reconnecting client wants; it fails only with the track's
    /// own error (its publisher dropped or aborted it) or its end.
    pub async fn follow_track(
        &self,
        path: impl Into<Path>,
        name: &str,
    ) -> Result<super::FollowedTrack, Error> {
        let path: Path = path.into();
        let mut announced = self.announced(path.clone());
        let broadcast = loop {
            if let Some(broadcast) = self.consume_broadcast(path.clone()) {
                break broadcast;
            }
            announced.next().await;
        };
        drop(announced);
        let track = broadcast.subscribe_track(name).await?;
        Ok(super::FollowedTrack::following(self, path, 0, broadcast, track).persistent())
    }

    /// Consumers of every broadcast at `path` whose route does not pass through the relay
    /// `exclude` (0 excludes nothing), best first: the routes a subscription can move
    /// between.
    pub fn routes_to(&self, path: impl Into<Path>, exclude: u64) -> Vec<BroadcastConsumer> {
        let path = self.absolute(path.into());
        if !self.allows_absolute(&path) {
            return Vec::new();
        }
        let state = self.shared.state.lock();
        let Some(entry) = state.broadcasts.get(&path) else {
            return Vec::new();
        };
        entry
            .publications
            .not_through(exclude)
            .map(|publication| publication.broadcast.consume())
            .collect()
    }

    /// The count of changes to the publications at `path` (a publication added,
    /// removed, or its route changed), closed once the path has none left; `None` if it has
    /// none now. What a track that follows its broadcast across routes watches.
    pub fn route_changes(&self, path: impl Into<Path>) -> Option<RouteChanges> {
        let path = self.absolute(path.into());
        let mut state = self.shared.state.lock();
        let entry = state.broadcasts.get_mut(&path)?;
        let changes = entry.changes.get_or_insert_with(|| ChangeCount {
            cell: moqx_kio::Producer::new(0),
            count: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        });
        Some(RouteChanges {
            cell: changes.cell.consume(),
            count: changes.count.clone(),
        })
    }

    /// The paths of the active broadcasts under `prefix`, in byte order.
    pub fn paths(&self, prefix: impl Into<Path>) -> Vec<Path> {
        let prefix = self.absolute(prefix.into());
        let state = self.shared.state.lock();
        state
            .under(&prefix)
            .filter(|(path, _)| self.allows_absolute(path))
            .filter_map(|(path, _)| self.relative(path))
            .collect()
    }

    /// The route of every active broadcast under `prefix`: its path (relative to this
    /// view) and the hop ids it came through (see [`BroadcastProducer::set_hops`]), in
    /// byte order of path. What a relay shows of its routes.
    pub fn routes(&self, prefix: impl Into<Path>) -> Vec<(Path, Vec<u64>)> {
        let prefix = self.absolute(prefix.into());
        let state = self.shared.state.lock();
        state
            .under(&prefix)
            .filter(|(path, _)| self.allows_absolute(path))
            .filter_map(|(path, source)| Some((self.relative(path)?, source.route().hops)))
            .collect()
    }

    /// How many broadcasts this view sees: O(1) on the whole origin, a walk of its part on a
    /// [scoped](Origin::scope) view. Copies no path (what `/metrics` needs, under the
    /// origin's lock for as short a time as it can). Lingering paths are not counted.
    pub fn broadcast_count(&self) -> usize {
        let state = self.shared.state.lock();
        match &self.scope {
            None => state.broadcasts.len() - state.lingering_paths,
            Some(scope) => {
                let root = scope.absolute(&Path::root());
                state
                    .under(&root)
                    .filter(|(path, _)| scope.allows(path))
                    .count()
            }
        }
    }

    /// The origin's announcement listeners ([`announced`](Self::announced) streams alive
    /// on any view of it), and the changes waiting for them to read, in all. A listener
    /// holds at most one waiting change per path it must still hear about, so the second
    /// figure is bounded by listeners × active paths, whatever peers churn.
    pub fn listener_stats(&self) -> ListenerStats {
        let state = self.shared.state.lock();
        ListenerStats {
            listeners: state.listeners.len(),
            waiting_changes: state
                .listeners
                .iter()
                .map(|listener| listener.events.len())
                .sum(),
        }
    }

    /// Follows the broadcasts under `prefix` (normalized; segment-wise, so `room` covers
    /// `room/alice` but not `roomba`; the root covers everything).
    pub fn announced(&self, prefix: impl Into<Path>) -> Announced {
        self.announced_excluding(prefix, 0)
    }

    /// Follows the broadcasts under `prefix` as a peer relay whose hop id is `exclude`
    /// must see them: for each path, the best route that does not pass through that
    /// peer, and an end when every route does (spec: moq-lite-06, "Routing": a peer the
    /// serving route flows through hears of the best standby). 0 excludes nothing.
    pub fn announced_excluding(&self, prefix: impl Into<Path>, exclude: u64) -> Announced {
        let relative = prefix.into();
        let prefix = self.absolute(relative.clone());
        let filter = self.scope.clone().filter(|scope| !scope.covers(&prefix));
        let events = Arc::new(PendingAnnouncements::new(self.shared.memory.clone()));
        let mut state = self.shared.state.lock();
        let id = state.next_id;
        state.next_id += 1;
        let mut initial = 0;
        let visible = |path: &Path| filter.as_ref().is_none_or(|s| s.allows(path));
        for (path, entry) in state
            .under_entries(&prefix)
            .filter(|(path, _)| visible(path))
        {
            if let Some(best) = entry.publications.best(exclude) {
                events.push(path, false, Some(best.broadcast.clone()));
                initial += 1;
            }
        }
        state.listeners.push(Listener {
            id,
            prefix,
            events: events.clone(),
            filter,
            exclude,
        });
        drop(state);
        Announced {
            origin: self.shared.clone(),
            id,
            prefix: relative,
            events,
            initial,
            scope: self.scope.clone(),
        }
    }

    /// A view of this origin whose paths are relative to `root`, allowed to touch only the
    /// paths under `allowed` (relative to `root`; the empty path allows all of `root`).
    ///
    /// The view publishes only there ([`publish`](Self::publish) fails with
    /// [`Error::Unauthorized`] elsewhere), and finds and announces only what is there.
    /// A view of a view allows what both allow.
    ///
    /// ```
    /// use moqx_net::model::{BroadcastProducer, Origin};
    ///
    /// let relay = Origin::new();
    /// // A client connected at `room`, allowed to publish only as `alice`.
    /// let alice = relay.scope("room", ["alice"]);
    /// let camera = BroadcastProducer::new();
    /// alice.publish("alice/camera", &camera).unwrap();
    /// assert!(alice.publish("bob", &BroadcastProducer::new()).is_err());
    /// assert!(relay.consume_broadcast("room/alice/camera").is_some());
    /// assert_eq!(relay.scope("room", [""]).paths(""), ["alice/camera".into()]);
    /// assert!(relay.scope("lobby", [""]).paths("").is_empty());
    /// ```
    pub fn scope<P: Into<Path>>(
        &self,
        root: impl Into<Path>,
        allowed: impl IntoIterator<Item = P>,
    ) -> Origin {
        let allowed: Vec<Path> = allowed.into_iter().map(Into::into).collect();
        let scope = Scope::new(self.scope.as_deref(), &root.into(), &allowed);
        Origin {
            shared: self.shared.clone(),
            scope: Some(Arc::new(scope)),
        }
    }

    /// Whether this view may touch `path` (relative to it): publish there, or see what is
    /// there. Always true for the whole origin.
    pub fn allows(&self, path: impl Into<Path>) -> bool {
        self.allows_absolute(&self.absolute(path.into()))
    }

    /// Whether this view sees the absolute `path`.
    fn allows_absolute(&self, path: &Path) -> bool {
        self.scope.as_ref().is_none_or(|scope| scope.allows(path))
    }

    /// The absolute path of a path relative to this view.
    fn absolute(&self, path: Path) -> Path {
        match &self.scope {
            Some(scope) => scope.absolute(&path),
            None => path,
        }
    }

    /// The path relative to this view of an absolute path under its root.
    fn relative(&self, path: &Path) -> Option<Path> {
        match &self.scope {
            Some(scope) => scope.relative(path),
            None => Some(path.clone()),
        }
    }
}

impl Announced {
    /// The prefix this stream follows.
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// How many announcements at the start of the stream are the snapshot of broadcasts that
    /// were active when it was created (moq-lite-05's ANNOUNCE_OK "active count").
    pub fn initial_len(&self) -> usize {
        self.initial
    }

    /// The next announcement, if one is queued.
    pub fn try_next(&mut self) -> Option<Announcement> {
        let (path, active) = self.events.try_pop()?;
        Some(announcement(path, active, self.scope.as_deref()))
    }

    /// The next announcement, or `Pending` until there is one.
    pub fn poll_next(&mut self, waiter: &Waiter) -> Poll<Announcement> {
        self.events
            .poll_pop(waiter)
            .map(|(path, active)| announcement(path, active, self.scope.as_deref()))
    }

    /// Waits for the next announcement.
    pub async fn next(&mut self) -> Announcement {
        moqx_kio::wait(|waiter| self.poll_next(waiter)).await
    }
}

impl Drop for Announced {
    fn drop(&mut self) {
        let mut state = self.origin.state.lock();
        state.listeners.retain(|listener| listener.id != self.id);
    }
}

impl Announcement {
    /// The full path this announcement is about.
    pub fn path(&self) -> &Path {
        match self {
            Announcement::Active { path, .. } | Announcement::Ended { path } => path,
        }
    }
}

impl OriginShared {
    /// Withdraws publication `id` at `path`, announcing the change to whoever it was the
    /// best route for; if lingering is on and it was the path's last, the path lingers.
    fn unpublish(&self, path: &Path, id: u64) {
        let mut state = self.state.lock();
        if !state.broadcasts.contains_key(path) {
            return;
        }
        state.removing_lost = state.linger.is_some()
            && state
                .broadcasts
                .get(path)
                .and_then(|entry| entry.publications.get(id))
                .is_some_and(|publication| publication.broadcast.is_lost());
        let removed = state.change(path, |publications| publications.remove(id));
        state.removing_lost = false;
        let began = state
            .began_lingering
            .take()
            .and_then(|lingering| Some((state.linger.clone()?, lingering)));
        drop(state);
        drop(removed);
        if let Some((queue, lingering)) = began {
            tracing::debug!(path = %lingering.path, "no route left: the path lingers");
            let _ = queue.try_push(lingering);
        }
    }

    /// Gives publication `id` at `path` its broadcast's new route (version `version`),
    /// re-ranking the path and announcing what that changes.
    fn reroute(&self, path: &Path, id: u64, route: &Route, version: u64) {
        let mut state = self.state.lock();
        if !state.broadcasts.contains_key(path) {
            return;
        }
        state.change(path, |publications| {
            publications.reroute(id, path.as_str(), route.clone(), version);
            None::<()>
        });
    }
}

impl OriginState {
    /// Every path under `prefix`, with its publications.
    fn under_entries<'a>(
        &'a self,
        prefix: &'a Path,
    ) -> impl Iterator<Item = (&'a Path, &'a PathState)> + 'a {
        // Paths under a prefix share its bytes, so they sort together from the prefix on;
        // `has_prefix` drops the byte-wise neighbours that are not segment-wise children
        // (`roomba` after `room`).
        self.broadcasts
            .range::<str, _>((
                std::ops::Bound::Included(prefix.as_str()),
                std::ops::Bound::Unbounded,
            ))
            .take_while(move |(path, _)| path.as_str().starts_with(prefix.as_str()))
            .filter(move |(path, _)| path.has_prefix(prefix))
    }

    /// The active broadcast of every path under `prefix`.
    fn under<'a>(
        &'a self,
        prefix: &'a Path,
    ) -> impl Iterator<Item = (&'a Path, &'a BroadcastSource)> + 'a {
        self.under_entries(prefix)
            .filter_map(|(path, entry)| Some((path, &entry.publications.best(0)?.broadcast)))
    }

    /// Changes the publications at `path` with `mutate` (creating the path's entry if it
    /// has none, removing it once it has no publication left), then queues, for every
    /// listener whose prefix covers the path, the change of its best route there, if it
    /// changed; returns what `mutate` returned, to be dropped outside the lock.
    fn change<T>(
        &mut self,
        path: &Path,
        mutate: impl FnOnce(&mut Publications) -> Option<T>,
    ) -> Option<T> {
        let entry = self.broadcasts.entry(path.clone()).or_default();
        // The best route before, once per exclusion the listeners here use (almost always
        // one: clients exclude nothing; peers are few).
        let mut views: Vec<View> = Vec::new();
        for listener in self.listeners.iter().filter(|l| l.wants(path)) {
            if !views.iter().any(|view| view.exclude == listener.exclude) {
                views.push(View {
                    exclude: listener.exclude,
                    before: entry.publications.best_id(listener.exclude),
                });
            }
        }
        // Its listeners were told it active, and never told it ended.
        let was_lingering = entry.lingering.is_some();
        let result = mutate(&mut entry.publications);
        // The last publication went, with lingering on: the path stays, announced as it
        // was, until its linger ends; one coming back takes it in place.
        let lingers = entry.publications.is_empty()
            && self.linger.is_some()
            && (self.removing_lost || was_lingering);
        match (lingers, entry.lingering) {
            (true, None) => {
                let ticket = self.next_id;
                self.next_id += 1;
                entry.lingering = Some(ticket);
                self.lingering_paths += 1;
                self.began_lingering = Some(LingeringPath {
                    path: path.clone(),
                    ticket,
                });
            }
            (false, Some(_)) if !entry.publications.is_empty() => {
                entry.lingering = None;
                self.lingering_paths -= 1;
            }
            _ => {}
        }
        if let Some(changes) = &entry.changes {
            let count = changes
                .count
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
                + 1;
            changes.cell.update(|cell| *cell = count);
        }
        for listener in self.listeners.iter().filter(|l| l.wants(path)) {
            let Some(view) = views.iter().find(|view| view.exclude == listener.exclude) else {
                continue;
            };
            let after = entry.publications.best(listener.exclude);
            if lingers {
                continue; // no end while it lingers
            }
            if after.map(|p| (p.id, p.version)) != view.before {
                listener.events.push(
                    path,
                    view.before.is_some() || was_lingering,
                    after.map(|p| p.broadcast.clone()),
                );
            }
        }
        if entry.publications.is_empty() && !lingers {
            // Followers see the path's changes closed: nothing serves it any more.
            self.broadcasts.remove(path);
        }
        result
    }
}

/// The announcement of a change, its path relative to `scope`'s root (under which every
/// change a scoped listener hears is).
fn announcement(
    path: Path,
    active: Option<BroadcastSource>,
    scope: Option<&Scope>,
) -> Announcement {
    let path = match scope {
        Some(scope) => scope.relative(&path).unwrap_or(path),
        None => path,
    };
    match active {
        Some(broadcast) => Announcement::Active {
            path,
            broadcast: broadcast.consume(),
        },
        None => Announcement::Ended { path },
    }
}

#[cfg(test)]
mod tests;
