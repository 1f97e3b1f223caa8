//! Tracks that follow their broadcast from route to route: a relay's subscription that
//! survives the loss of the link it was served over.
//!
//! A relay in a mesh can reach one publisher's broadcast by several routes
//! ([`Route`](super::Route)). A [`FollowedTrack`] reads a track of the best of them and
//! watches the path: when the best route changes to another route of the **same
//! publisher** (the link it read from died, or was priced out by a draining peer), it
//! subscribes to the same track there and carries on at the next group it has not
//! delivered (a splice, at a group boundary). A group that was in flight on a dead link
//! is lost; nothing else is. A route of **another** publisher is a replacement: the
//! followed track keeps reading what it has and ends with it, and the subscriber learns
//! of the new broadcast from its announcements.
//!
//! Splicing is per subscriber but costs the relay one upstream subscription per track on
//! the new route, however many subscribers move: they ask the same on-demand broadcast,
//! which opens one.

use std::task::Poll;

use moqx_kio::Waiter;

use super::broadcast::{BroadcastConsumer, PendingTrack};
use super::group::GroupConsumer;
use super::origin::Origin;
use super::path::Path;
use super::route::Route;
use super::track::{Track, TrackConsumer};
use crate::Error;

/// A track read through an origin, following its broadcast across routes (see the module
/// docs); or, made with [`FollowedTrack::fixed`], a plain track.
#[derive(Debug)]
pub struct FollowedTrack {
    track: TrackConsumer,
    /// Groups the tracks given up before skipped.
    lagged_before: u64,
    follow: Option<Box<Follow>>,
}

/// What following takes.
#[derive(Debug)]
struct Follow {
    /// The view the track was resolved through.
    origin: Origin,
    path: Path,
    /// The track's properties (its name among them), as the route read first gave them.
    properties: Track,
    /// The peer this track is served to: routes through it are never used.
    exclude: u64,
    /// The broadcast `track` belongs to, and its route when reading began.
    source: BroadcastConsumer,
    route: Route,
    /// The path's changes, and the count last looked at; `None` once the path has none.
    changes: Option<super::origin::RouteChanges>,
    seen: u64,
    /// The track on a better route of the same publisher, while it resolves (boxed, as
    /// the fields below that are rarely used: a relay holds one `Follow` per served
    /// subscription, and most never move).
    next: Option<Box<Next>>,
    /// The groups delivered lately: after a splice, the ones the new route sends again
    /// are skipped, and it is asked for the first one missing.
    delivered: Delivered,
    /// Set by a splice: groups the new route sends are checked against `delivered`.
    spliced_once: bool,
    /// The current track ended with this error; waiting for another route.
    failed: Option<Error>,
    /// Spliced, and no group read from the new route yet.
    spliced: bool,
    /// Wait for a route of the same publisher to come back when the path has none left
    /// (an application's subscription across its own reconnects), instead of ending.
    persistent: bool,
    /// While the path has no route: its announcements, to see it come back.
    returning: Option<Box<super::origin::Announced>>,
}

/// How far below the last delivered group the first group of a new route may be and
/// still be taken for the same publisher's (groups travel on their own streams and
/// arrive out of order); lower, its sequence restarted: another generation.
const REORDER_WINDOW: u64 = 64;

#[derive(Debug)]
struct Next {
    broadcast: BroadcastConsumer,
    route: Route,
    pending: PendingTrack,
}

impl FollowedTrack {
    /// A plain track: it ends when `track` does.
    pub fn fixed(track: TrackConsumer) -> Self {
        Self {
            track,
            lagged_before: 0,
            follow: None,
        }
    }

    /// `track`, read from `source` (the best broadcast at `path` in `origin` not through
    /// the relay `exclude`), following the path to the same publisher's other routes.
    pub fn following(
        origin: &Origin,
        path: impl Into<Path>,
        exclude: u64,
        source: BroadcastConsumer,
        track: TrackConsumer,
    ) -> Self {
        let path = path.into();
        let changes = origin.route_changes(path.clone());
        let seen = changes.as_ref().map_or(0, |changes| changes.count());
        let properties = track.track().clone();
        let route = source.route();
        Self {
            track,
            lagged_before: 0,
            follow: Some(Box::new(Follow {
                origin: origin.clone(),
                path,
                properties,
                exclude,
                source,
                route,
                changes,
                seen,
                next: None,
                delivered: Delivered::default(),
                spliced_once: false,
                failed: None,
                spliced: false,
                persistent: false,
                returning: None,
            })),
        }
    }

    /// Makes the track wait for a route of its publisher to come back when its path has
    /// none left, instead of failing: what an application that reconnects wants of its
    /// subscriptions ([`Origin::follow_track`]). It fails only if it was never following.
    pub fn persistent(mut self) -> Self {
        if let Some(follow) = self.follow.as_deref_mut() {
            follow.persistent = true;
        }
        self
    }

    /// Reads this track frame by frame, every open group's frames as they arrive
    /// ([`TrackFrames`](super::TrackFrames)): what a chat client or any reader of
    /// single-frame groups wants.
    pub fn frames(self) -> super::TrackFrames {
        super::TrackFrames::new(self)
    }

    /// The track's properties (of the route read now).
    pub fn track(&self) -> &Track {
        self.track.track()
    }

    /// Groups skipped because the subscriber read too slowly or they expired, on every
    /// route read so far.
    pub fn lagged(&self) -> u64 {
        self.lagged_before + self.track.lagged()
    }

    /// The next group to deliver; `Ok(None)` once the track finished; the track's error
    /// once it failed with no route of its publisher left to carry on from.
    pub fn poll_next_group(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<Option<GroupConsumer>, Error>> {
        loop {
            if let Some(follow) = self.follow.as_deref_mut() {
                // A healthy route is checked without a lock (an atomic load per read); a
                // failed one waits on the path's changes.
                match follow.failed {
                    None => follow.check(),
                    Some(_) => follow.watch(waiter),
                }
                if let Some(next) = &mut follow.next {
                    match next.pending.poll_track(waiter) {
                        Poll::Ready(Ok(track)) => {
                            let next = follow.next.take().expect("just polled");
                            tracing::debug!(
                                path = %follow.path,
                                track = %follow.properties.name,
                                from = ?follow.route.hops,
                                to = ?next.route.hops,
                                resume = ?follow.delivered.first_missing(),
                                "the subscription moves to another route"
                            );
                            self.lagged_before += self.track.lagged();
                            self.track = track;
                            follow.source = next.broadcast;
                            follow.route = next.route;
                            follow.spliced_once = true;
                            follow.failed = None;
                            follow.spliced = true;
                        }
                        Poll::Ready(Err(error)) => {
                            tracing::debug!(path = %follow.path, track = %follow.properties.name, %error, "the other route refused the track");
                            follow.next = None;
                        }
                        Poll::Pending => {}
                    }
                }
                if let Some(error) = follow.failed {
                    if follow.next.is_some() || follow.changes.is_some() {
                        return Poll::Pending; // woken by the route's answer or a change
                    }
                    if !follow.persistent {
                        return Poll::Ready(Err(error));
                    }
                    if follow.poll_return(waiter).is_pending() {
                        return Poll::Pending;
                    }
                    continue; // the path is back: look at it
                }
            }
            match self.track.poll_next_group(waiter) {
                Poll::Ready(Ok(Some(group))) => {
                    if let Some(follow) = self.follow.as_deref_mut() {
                        let sequence = group.sequence();
                        let highest = follow.delivered.highest;
                        if std::mem::take(&mut follow.spliced)
                            && highest.is_some_and(|highest| {
                                sequence.saturating_add(REORDER_WINDOW) < highest
                            })
                        {
                            // Its sequence started over: a new generation at the path,
                            // which the subscriber hears of as a new announcement.
                            tracing::debug!(path = %follow.path, track = %follow.properties.name, sequence, ?highest, "the new route's groups restarted: the subscription ends");
                            return Poll::Ready(Ok(None));
                        }
                        if follow.spliced_once && follow.delivered.contains(sequence) {
                            continue; // delivered from the route before
                        }
                        follow.delivered.record(sequence);
                    }
                    return Poll::Ready(Ok(Some(group)));
                }
                Poll::Ready(Ok(None)) => return Poll::Ready(Ok(None)),
                Poll::Ready(Err(error)) => match self.follow.as_deref_mut() {
                    None => return Poll::Ready(Err(error)),
                    Some(follow) => {
                        tracing::debug!(path = %follow.path, track = %follow.properties.name, %error, "the route the subscription read from failed");
                        follow.failed = Some(error);
                        // Another route of the publisher, if there is one now.
                        follow.reconsider(false);
                        if follow.next.is_none() && !follow.source.is_closed() && !follow.persistent
                        {
                            // Failed while its broadcast lives, and no other route: the
                            // publisher's doing (or a relay upstream that had none).
                            return Poll::Ready(Err(error));
                        }
                    }
                },
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Waits for the next group.
    pub async fn next_group(&mut self) -> Result<Option<GroupConsumer>, Error> {
        moqx_kio::wait(|waiter| self.poll_next_group(waiter)).await
    }
}

impl Follow {
    /// While the path has no route: ready once one is published there again, watching
    /// its changes from then on.
    fn poll_return(&mut self, waiter: &Waiter) -> Poll<()> {
        let path = self.path.clone();
        let origin = self.origin.clone();
        if self.returning.is_none() {
            tracing::debug!(path = %self.path, track = %self.properties.name, "no route left: waiting for the publisher to come back");
        }
        let returning = self
            .returning
            .get_or_insert_with(|| Box::new(origin.announced(path.clone())));
        // Published meanwhile (between the end and this listener)?
        if let Some(changes) = origin.route_changes(path.clone()) {
            self.returning = None;
            self.seen = u64::MAX; // look at it at once
            self.changes = Some(changes);
            return Poll::Ready(());
        }
        loop {
            match returning.poll_next(waiter) {
                Poll::Ready(super::origin::Announcement::Active { path: at, .. }) if at == path => {
                    self.returning = None;
                    self.changes = origin.route_changes(path);
                    self.seen = u64::MAX;
                    return Poll::Ready(());
                }
                Poll::Ready(_) => continue, // another path under it, or an end
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Looks at the path again if it changed since last time, without waiting (no lock
    /// unless it changed).
    fn check(&mut self) {
        let Some(changes) = &self.changes else {
            return;
        };
        let count = changes.count();
        if count != self.seen {
            self.seen = count;
            self.reconsider(true);
        }
    }

    /// [`check`](Self::check), waiting for the next change (or the path's end): on
    /// return, `waiter` is registered for it, or a move is under way (`next`), or the
    /// path has nothing left (`changes` is `None`).
    fn watch(&mut self, waiter: &Waiter) {
        loop {
            let Some(changes) = &self.changes else {
                return;
            };
            match changes.poll_changed(waiter, self.seen) {
                Poll::Ready(Ok(count)) => {
                    self.seen = count;
                    self.reconsider(true);
                    if self.next.is_some() {
                        return; // the move's answer wakes the follower
                    }
                    // Regression: returning here left nothing to wake a failed follower
                    // whose path then ended: a reader stuck for good (the cluster demo's
                    // readers of a user whose relay died). Poll again, to register.
                }
                // Nothing is published at the path any more.
                Poll::Ready(Err(_)) => {
                    self.changes = None;
                    return;
                }
                Poll::Pending => return,
            }
        }
    }

    /// Moves to the path's best route if it is another route of the same publisher.
    /// `changed`: the path changed since the current route failed, which lets a
    /// persistent follower try that route again (it came back in place: the same
    /// broadcast, announced anew).
    fn reconsider(&mut self, changed: bool) {
        let routes = self.origin.routes_to(self.path.clone(), self.exclude);
        let failed_source = self.failed.is_some() && !(self.persistent && changed);
        let Some(best) = routes
            .into_iter()
            .find(|route| !(failed_source && route.same_broadcast(&self.source)))
        else {
            return; // no route now: stay on the current one while it lasts
        };
        if self.failed.is_none() && best.same_broadcast(&self.source) {
            self.next = None; // back on the best route, or never left it
            return;
        }
        if self
            .next
            .as_ref()
            .is_some_and(|next| next.broadcast.same_broadcast(&best))
        {
            return; // already moving there
        }
        let route = best.route();
        if !route.same_publisher(&self.route) {
            tracing::debug!(path = %self.path, track = %self.properties.name, ours = ?self.route.hops, theirs = ?route.hops, "another publisher's broadcast at the path: not moving there");
            // Another publisher took the path: a replacement, not a splice. A track whose
            // route is gone has nothing left to wait for.
            self.next = None;
            if self.failed.is_some() {
                self.changes = None;
                self.persistent = false;
            }
            return;
        }
        // From the first group not delivered: the new route's caches hold what was
        // published while the old one was failing.
        let pending = match self.delivered.first_missing() {
            Some(start) => best.resume_track(&self.properties, start),
            None => best.subscribe_track(&self.properties.name),
        };
        self.next = Some(Box::new(Next {
            broadcast: best,
            route,
            pending,
        }));
    }
}

/// The groups a followed track delivered lately: the first and the highest, and which of
/// the [`WINDOW`] below the highest (groups travel on their own streams and arrive out of
/// order, so a route can fail with a hole below the highest).
#[derive(Debug, Default, Clone, Copy)]
struct Delivered {
    first: Option<u64>,
    highest: Option<u64>,
    /// Bit `i` set: group `highest - 1 - i` was delivered.
    below: u64,
}

/// How many groups below the highest [`Delivered`] remembers.
const WINDOW: u64 = 64;

impl Delivered {
    fn record(&mut self, sequence: u64) {
        self.first = Some(self.first.map_or(sequence, |first| first.min(sequence)));
        match self.highest {
            None => self.highest = Some(sequence),
            Some(highest) if sequence > highest => {
                let shift = sequence - highest;
                self.below = match shift {
                    WINDOW.. => 0,
                    _ => (self.below << shift) | (1 << (shift - 1)),
                };
                self.highest = Some(sequence);
            }
            Some(highest) if sequence < highest && highest - sequence <= WINDOW => {
                self.below |= 1 << (highest - sequence - 1);
            }
            Some(_) => {}
        }
    }

    /// Whether `sequence` was delivered (or is older than the window: given up on).
    fn contains(&self, sequence: u64) -> bool {
        match self.highest {
            None => false,
            Some(highest) if sequence >= highest => sequence == highest,
            Some(highest) => {
                let below = highest - sequence;
                below > WINDOW || self.below & (1 << (below - 1)) != 0
            }
        }
    }

    /// The first group to ask a new route for: the oldest one missing since the first
    /// delivered, within the window; else the one after the highest. `None` before any.
    fn first_missing(&self) -> Option<u64> {
        let (first, highest) = (self.first?, self.highest?);
        let lowest = first.max(highest.saturating_sub(WINDOW));
        (lowest..highest)
            .find(|sequence| !self.contains(*sequence))
            .or(Some(highest.saturating_add(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BroadcastProducer, Track};

    /// A waker that counts its wakes.
    struct Counter(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Counter {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Regression (the cluster demo: readers of a user whose relay died never heard it
    /// again): a persistent follower whose route failed while its broadcast still lived
    /// (the relay's reset came before its announcement's end), and whose path then ended,
    /// returned `Pending` registered nowhere: nothing woke it when the publisher came
    /// back.
    #[test]
    fn a_failed_follower_whose_path_ends_is_woken_when_its_publisher_comes_back() {
        let origin = Origin::new();
        let first = BroadcastProducer::new();
        first.set_hops(vec![77, 2]);
        let mut writer = first.create_track(Track::new("chat"));
        origin.publish("alice", &first).unwrap();
        let source = origin.consume_broadcast("alice").unwrap();
        let counter = std::sync::Arc::new(Counter(std::sync::atomic::AtomicUsize::new(0)));
        let waker = std::task::Waker::from(counter.clone());
        let waiter = Waiter::new(&waker);
        let Poll::Ready(Ok(track)) = source.subscribe_track("chat").poll_track(&waiter) else {
            panic!("a live track resolves at once");
        };
        let mut followed =
            FollowedTrack::following(&origin, "alice", 0, source, track).persistent();
        writer.append_group().finish();
        assert!(matches!(
            followed.poll_next_group(&waiter),
            Poll::Ready(Ok(Some(_)))
        ));

        // The track fails while its broadcast lives, then the path ends.
        writer.abort(Error::Dropped);
        assert!(followed.poll_next_group(&waiter).is_pending());
        drop(first);
        assert!(followed.poll_next_group(&waiter).is_pending());

        // The publisher comes back by another route.
        let woken = counter.0.load(std::sync::atomic::Ordering::Relaxed);
        let second = BroadcastProducer::new();
        second.set_hops(vec![77, 3]);
        let mut writer = second.create_track(Track::new("chat"));
        origin.publish("alice", &second).unwrap();
        assert!(
            counter.0.load(std::sync::atomic::Ordering::Relaxed) > woken,
            "the follower is woken when its publisher is back"
        );
        assert!(followed.poll_next_group(&waiter).is_pending(), "moving");
        writer.create_group(1).finish();
        assert!(matches!(
            followed.poll_next_group(&waiter),
            Poll::Ready(Ok(Some(group))) if group.sequence() == 1
        ));
    }

    #[test]
    fn a_hole_below_the_highest_is_where_a_new_route_starts() {
        let mut delivered = Delivered::default();
        assert_eq!(delivered.first_missing(), None);
        for sequence in [10, 11, 13, 14] {
            delivered.record(sequence);
        }
        assert_eq!(delivered.first_missing(), Some(12), "12 was in flight");
        assert!(delivered.contains(13) && !delivered.contains(12) && !delivered.contains(15));
        delivered.record(12);
        assert_eq!(delivered.first_missing(), Some(15));
        delivered.record(200);
        assert!(delivered.contains(100), "older than the window: given up");
        assert!(!delivered.contains(199));
        assert_eq!(delivered.first_missing(), Some(136));
    }
}
