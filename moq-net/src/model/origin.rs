//! Origins: broadcasts published by path, discovered by prefix.
//!
//! An [`Origin`] is the directory a relay shares between all of its sessions: a publishing
//! session puts the broadcasts it receives there, and every subscribing session discovers
//! them through [`Origin::announced`], a live stream of [`Announcement`]s for one prefix that
//! starts with a snapshot of what is already active. A broadcast is withdrawn automatically
//! when its [`BroadcastProducer`] is dropped.
//!
//! Several producers may publish the same path (a publisher reconnecting while its old
//! session times out, or two routes to one broadcast). The one with the shortest route is
//! active, the most recent among equals; if it goes away while another is still live, that
//! one becomes active, announced as a fresh [`Announcement::Active`] (a restart, in
//! moq-lite-05 terms). [`Announcement::Ended`] comes only when no publisher is left.
//!
//! Announcements are queued per listener under the origin's lock, so that every listener sees
//! every path's changes in the order they happened; publishing costs one queue push per
//! listener whose prefix matches. A listener's queue holds at most one change per path:
//! while a change waits, a newer one of the same path replaces it (see
//! [`PendingAnnouncements`]), so a listener that stops reading holds the origin's size in
//! changes, not its history. Frames never go through here.

use std::collections::BTreeMap;
use std::task::Poll;

use kio::Waiter;
use kio::sync::{Arc, Mutex};

use super::broadcast::{BroadcastConsumer, BroadcastProducer, BroadcastSource};
use super::budget::MemoryBudget;
use super::hook::DropHook;
use super::path::Path;
use super::pending::PendingAnnouncements;
use super::scope::Scope;
use crate::Error;

/// Broadcasts by path. Cloning gives another handle to the same origin.
///
/// ```
/// use moq_net::model::{Announcement, BroadcastProducer, Origin};
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
    shared: Arc<OriginShared>,
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
struct OriginShared {
    state: Mutex<OriginState>,
    /// What the announcements waiting for listeners are charged to.
    memory: Option<MemoryBudget>,
}

#[derive(Debug, Default)]
struct OriginState {
    /// Every live publication per path; the active one is last.
    broadcasts: BTreeMap<Path, Vec<Publication>>,
    listeners: Vec<Listener>,
    next_id: u64,
}

#[derive(Debug)]
struct Publication {
    id: u64,
    /// The length of the broadcast's route when it was published.
    hops: usize,
    broadcast: BroadcastSource,
}

#[derive(Debug)]
struct Listener {
    id: u64,
    /// Absolute.
    prefix: Path,
    events: Arc<PendingAnnouncements>,
    /// Set when the listener's view allows only part of its prefix: events for paths
    /// outside it are not queued.
    filter: Option<Arc<Scope>>,
}

impl Listener {
    fn wants(&self, path: &Path) -> bool {
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
    /// When several broadcasts are published at one path, the active one has the shortest
    /// route ([`BroadcastProducer::set_hops`], read now), and among equals the newest: a
    /// reconnecting publisher replaces its stale session, and a relay in a mesh keeps the
    /// direct route instead of flapping between routes that came around.
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
        let hops = source.hop_count();
        let mut state = self.shared.state.lock();
        let id = state.next_id;
        state.next_id += 1;
        let publications = state.broadcasts.entry(path.clone()).or_default();
        if publications
            .iter()
            .any(|publication| publication.broadcast.same_broadcast(&source))
        {
            return Ok(());
        }
        // Kept in preference order, the active one last.
        let at = publications.partition_point(|p| p.hops > hops || (p.hops == hops && p.id < id));
        let active = at == publications.len();
        let was_active = !publications.is_empty();
        publications.insert(
            at,
            Publication {
                id,
                hops,
                broadcast: source.clone(),
            },
        );
        if active {
            state.announce(&path, was_active, Some(&source));
        }
        drop(state);

        // A strong reference: the hook lives only until the broadcast's producer drops.
        let origin = self.shared.clone();
        broadcast.on_close(DropHook::new(move || origin.unpublish(&path, id)));
        Ok(())
    }

    /// A consumer of the broadcast active at `path`, if any (and if this view may see it).
    pub fn consume_broadcast(&self, path: impl Into<Path>) -> Option<BroadcastConsumer> {
        let path = self.absolute(path.into());
        if !self.allows_absolute(&path) {
            return None;
        }
        let state = self.shared.state.lock();
        let publications = state.broadcasts.get(&path)?;
        publications.last().map(|active| active.broadcast.consume())
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
            .filter_map(|(path, source)| Some((self.relative(path)?, source.hops())))
            .collect()
    }

    /// How many broadcasts this view sees: O(1) on the whole origin, a walk of its part on a
    /// [scoped](Origin::scope) view. Copies no path (what `/metrics` needs, under the
    /// origin's lock for as short a time as it can).
    pub fn broadcast_count(&self) -> usize {
        let state = self.shared.state.lock();
        match &self.scope {
            None => state.broadcasts.len(),
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
        let relative = prefix.into();
        let prefix = self.absolute(relative.clone());
        let filter = self.scope.clone().filter(|scope| !scope.covers(&prefix));
        let events = Arc::new(PendingAnnouncements::new(self.shared.memory.clone()));
        let mut state = self.shared.state.lock();
        let id = state.next_id;
        state.next_id += 1;
        let mut initial = 0;
        let visible = |path: &Path| filter.as_ref().is_none_or(|s| s.allows(path));
        for (path, active) in state.under(&prefix).filter(|(path, _)| visible(path)) {
            events.push(path, false, Some(active.clone()));
            initial += 1;
        }
        state.listeners.push(Listener {
            id,
            prefix,
            events: events.clone(),
            filter,
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
    /// use moq_net::model::{BroadcastProducer, Origin};
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
        kio::wait(|waiter| self.poll_next(waiter)).await
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
    /// Withdraws publication `id` at `path`, announcing the change if it was active.
    fn unpublish(&self, path: &Path, id: u64) {
        let mut state = self.state.lock();
        let Some(publications) = state.broadcasts.get_mut(path) else {
            return;
        };
        let Some(index) = publications.iter().position(|p| p.id == id) else {
            return;
        };
        let was_active = index + 1 == publications.len();
        let removed = publications.remove(index);
        let now_active = publications.last().map(|p| p.broadcast.clone());
        if now_active.is_none() {
            state.broadcasts.remove(path);
        }
        if was_active {
            state.announce(path, true, now_active.as_ref());
        }
        drop(state);
        drop(removed);
    }
}

impl OriginState {
    /// The active broadcast of every path under `prefix`.
    fn under<'a>(
        &'a self,
        prefix: &'a Path,
    ) -> impl Iterator<Item = (&'a Path, &'a BroadcastSource)> + 'a {
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
            .filter_map(|(path, publications)| Some((path, &publications.last()?.broadcast)))
    }

    /// Queues a change for every listener whose prefix covers `path`: it is now served by
    /// `active` (ended for `None`), and `was_active` before.
    fn announce(&self, path: &Path, was_active: bool, active: Option<&BroadcastSource>) {
        for listener in &self.listeners {
            if listener.wants(path) {
                listener.events.push(path, was_active, active.cloned());
            }
        }
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
mod tests {
    use super::*;
    use std::task::Waker;

    /// The queued announcements as `+path` / `-path`.
    fn drain(announced: &mut Announced) -> Vec<String> {
        std::iter::from_fn(|| announced.try_next())
            .map(|announcement| match announcement {
                Announcement::Active { path, .. } => format!("+{path}"),
                Announcement::Ended { path } => format!("-{path}"),
            })
            .collect()
    }

    #[test]
    fn a_listener_gets_a_snapshot_then_live_changes_under_its_prefix_only() {
        let origin = Origin::new();
        let a = BroadcastProducer::new();
        let other = BroadcastProducer::new();
        let lookalike = BroadcastProducer::new();
        origin.publish("/room//a/", &a).unwrap();
        origin.publish("lobby/x", &other).unwrap();
        origin.publish("roomba", &lookalike).unwrap();

        let mut room = origin.announced("room/");
        assert_eq!(room.prefix().as_str(), "room");
        assert_eq!(room.initial_len(), 1);
        assert_eq!(drain(&mut room), ["+room/a"]);

        let b = BroadcastProducer::new();
        origin.publish("room/b", &b).unwrap();
        origin
            .publish("roomba/c", &BroadcastProducer::new())
            .unwrap(); // dropped at once
        drop(a);
        assert_eq!(drain(&mut room), ["+room/b", "-room/a"]);

        let mut everything = origin.announced("");
        assert_eq!(
            drain(&mut everything),
            ["+lobby/x", "+room/b", "+roomba"],
            "the root covers every path, in byte order"
        );
        assert_eq!(origin.paths("room"), [Path::new("room/b")]);
    }

    #[test]
    fn a_newer_publisher_replaces_and_an_older_one_takes_over_again() {
        let origin = Origin::new();
        let mut listener = origin.announced("");
        let first = BroadcastProducer::new();
        let second = BroadcastProducer::new();
        origin.publish("p", &first).unwrap();
        origin.publish("p", &first).unwrap(); // the same broadcast again: nothing
        assert_eq!(drain(&mut listener), ["+p"]);
        origin.publish("p", &second).unwrap();
        let active = origin.consume_broadcast("p").unwrap();
        assert!(active.same_broadcast(&second.consume()));
        assert_eq!(drain(&mut listener), ["+p"], "a restart");

        drop(second);
        let active = origin.consume_broadcast("p").unwrap();
        assert!(
            active.same_broadcast(&first.consume()),
            "fell back to the older one"
        );
        assert_eq!(drain(&mut listener), ["+p"], "a restart again");
        drop(first);
        assert!(origin.consume_broadcast("p").is_none());
        assert_eq!(drain(&mut listener), ["-p"]);
    }

    #[test]
    fn the_shortest_route_is_active_and_a_longer_one_changes_nothing() {
        let origin = Origin::new();
        let direct = BroadcastProducer::new();
        direct.set_hops(vec![1]);
        let around = BroadcastProducer::new();
        around.set_hops(vec![1, 2, 3]);
        let mut listener = origin.announced("");
        origin.publish("p", &direct).unwrap();
        origin.publish("p", &around).unwrap();
        assert_eq!(
            drain(&mut listener),
            ["+p"],
            "the longer route is not announced"
        );
        let active = origin.consume_broadcast("p").unwrap();
        assert!(active.same_broadcast(&direct.consume()));
        drop(direct);
        assert_eq!(
            drain(&mut listener),
            ["+p"],
            "the remaining route takes over"
        );
        assert!(
            origin
                .consume_broadcast("p")
                .unwrap()
                .same_broadcast(&around.consume())
        );
    }

    #[test]
    fn dropping_an_inactive_publisher_announces_nothing() {
        let origin = Origin::new();
        let older = BroadcastProducer::new();
        let newer = BroadcastProducer::new();
        origin.publish("p", &older).unwrap();
        origin.publish("p", &newer).unwrap();
        let mut listener = origin.announced("");
        drop(older);
        assert_eq!(drain(&mut listener), ["+p"], "only the snapshot");
        assert!(origin.consume_broadcast("p").is_some());
    }

    #[test]
    fn queued_announcements_do_not_count_as_consumers() {
        let origin = Origin::new();
        let mut listener = origin.announced("");
        let broadcast = BroadcastProducer::new();
        origin.publish("p", &broadcast).unwrap();
        let waiter = Waiter::new(Waker::noop());
        assert!(broadcast.poll_unused(&waiter).is_ready());
        let Some(Announcement::Active {
            broadcast: consumer,
            ..
        }) = listener.try_next()
        else {
            panic!("expected an announcement");
        };
        assert_eq!(broadcast.consumer_count(), 1);
        drop(consumer);
        assert!(broadcast.poll_unused(&waiter).is_ready());
    }

    #[test]
    fn a_dropped_listener_is_forgotten() {
        let origin = Origin::new();
        let listener = origin.announced("");
        assert_eq!(origin.shared.state.lock().listeners.len(), 1);
        drop(listener);
        assert!(origin.shared.state.lock().listeners.is_empty());
        origin.publish("p", &BroadcastProducer::new()).unwrap();
    }

    #[test]
    fn a_scoped_view_sees_announces_and_publishes_only_inside_its_scope() {
        let origin = Origin::new();
        let mut everything = origin.announced("");
        let room = origin.scope("room", ["alice", "bob"]);
        let mut seen = room.announced("");
        let mut only_bob = room.announced("bob");
        let mut outside = room.announced("carol");

        let alice = BroadcastProducer::new();
        let carol = BroadcastProducer::new();
        let lobby = BroadcastProducer::new();
        room.publish("alice/cam", &alice).unwrap();
        assert_eq!(room.publish("carol", &carol), Err(Error::Unauthorized));
        origin.publish("room/carol", &carol).unwrap();
        origin.publish("lobby/x", &lobby).unwrap();
        let bob = BroadcastProducer::new();
        origin.publish("room/bob", &bob).unwrap();

        assert_eq!(
            drain(&mut everything),
            ["+room/alice/cam", "+room/carol", "+lobby/x", "+room/bob"]
        );
        assert_eq!(
            drain(&mut seen),
            ["+alice/cam", "+bob"],
            "relative, filtered"
        );
        assert_eq!(drain(&mut only_bob), ["+bob"]);
        assert!(drain(&mut outside).is_empty());
        assert_eq!(room.paths(""), [Path::new("alice/cam"), Path::new("bob")]);
        assert_eq!(room.broadcast_count(), 2);
        assert_eq!(origin.broadcast_count(), 4);
        assert!(room.consume_broadcast("carol").is_none());
        assert!(room.consume_broadcast("bob").is_some());

        // A late listener's snapshot is filtered the same way.
        let mut late = room.announced("");
        assert_eq!(late.initial_len(), 2);
        drop(bob);
        assert_eq!(
            drain(&mut late),
            ["+alice/cam"],
            "bob came and went before the late listener looked: not mentioned"
        );
        drop(carol);
        assert_eq!(drain(&mut seen), ["-bob"], "carol's end is not seen either");
    }

    #[test]
    fn a_parked_listener_is_woken_from_another_thread() {
        let origin = Origin::new();
        let mut listener = origin.announced("chat");
        let handle = std::thread::spawn(move || {
            pollster::block_on(async {
                let mut paths = Vec::new();
                for _ in 0..2 {
                    paths.push(listener.next().await.path().to_string());
                }
                paths
            })
        });
        let users: Vec<BroadcastProducer> = ["a", "b"]
            .iter()
            .map(|user| {
                let broadcast = BroadcastProducer::new();
                origin.publish(format!("chat/{user}"), &broadcast).unwrap();
                broadcast
            })
            .collect();
        assert_eq!(handle.join().unwrap(), ["chat/a", "chat/b"]);
        drop(users);
    }
}
