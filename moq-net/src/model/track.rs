//! Tracks: named sequences of groups, with a cache for late joiners.
//!
//! Groups are appended in *arrival* order to a [`moqx_kio::log`] that retains the most recent
//! [`Track::cache_groups`]; sequence numbers may arrive out of order (a relay receives each
//! group on its own stream). A consumer starts at the latest group (the highest sequence in
//! the cache) or at a given sequence, and then receives every group that arrives, except:
//!
//! - groups below its start sequence, when it asked for one;
//! - groups that expired: once a newer group exists, a group whose first timestamp is more
//!   than [`Track::max_latency`] older than the newest first timestamp is skipped (spec:
//!   moq-lite, "Expiration", timestamp age). Wall-clock age needs a clock and is applied by
//!   the session layer, which has its runtime's;
//! - groups it was too slow to read: the cache released them, so the consumer skips to the
//!   oldest retained group and counts the skip ([`TrackConsumer::lagged`]).
//!
//! Nothing blocks the producer on a slow consumer.

use moqx_kio::sync::Arc;
use moqx_kio::sync::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use moqx_kio::Waiter;
use moqx_kio::log::{LogConfig, LogHandle, LogReader, LogWriter, Next, Start};

use super::budget::MemoryBudget;
use super::frame::Frame;
use super::group::{GroupConsumer, GroupProducer};
use super::hook::DropHook;
use super::status::Status;
use super::{Look, Park};
use crate::Error;

/// A track's name and delivery properties (spec: moq-lite-05, TRACK_INFO).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Track {
    /// The track's name within its broadcast.
    pub name: String,
    /// Publisher priority; higher is more important.
    pub priority: u8,
    /// Whether groups should be delivered in sequence order.
    pub ordered: bool,
    /// How far (in timestamp age) a non-latest group may fall behind the newest before it is
    /// dropped from delivery.
    pub max_latency: Duration,
    /// Timestamp units per second. Never zero.
    pub timescale: u64,
    /// How many recent groups are kept for late joiners and slow readers.
    pub cache_groups: usize,
    /// The most payload bytes of recent groups kept for late joiners and slow readers, on
    /// top of `cache_groups`; the latest group is kept whatever its size. Checked as each
    /// group starts, against the sizes of the groups before it; memory is released two
    /// groups at a time. `None`: only `cache_groups` bounds the cache.
    pub cache_bytes: Option<u64>,
}

impl Track {
    /// A track named `name` with the defaults: priority 0, unordered, 5 s max latency,
    /// millisecond timestamps, 32 cached groups, no byte budget.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            priority: 0,
            ordered: false,
            max_latency: Duration::from_secs(5),
            timescale: 1000,
            cache_groups: 32,
            cache_bytes: None,
        }
    }

    /// `max_latency` in timestamp units.
    fn max_latency_ticks(&self) -> u64 {
        let ticks = self.max_latency.as_millis() * u128::from(self.timescale.max(1)) / 1000;
        u64::try_from(ticks).unwrap_or(u64::MAX)
    }
}

/// Writes a track: creates its groups. Dropping it unfinished makes consumers see
/// [`Error::Dropped`] once they have read the cached groups.
///
/// ```
/// use moqx_net::model::{Track, TrackProducer};
///
/// let mut track = TrackProducer::new(Track::new("chat"));
/// let mut subscriber = track.consume(); // starts at the latest group
///
/// let mut group = track.append_group();
/// group.write(0, "hello");
/// group.finish();
///
/// pollster::block_on(async {
///     let mut group = subscriber.next_group().await.unwrap().unwrap();
///     assert_eq!(group.read_frame().await.unwrap().unwrap().payload, "hello");
/// });
/// ```
#[derive(Debug)]
pub struct TrackProducer {
    groups: LogWriter<GroupConsumer>,
    source: TrackSource,
    next_sequence: u64,
    /// The broadcast that lists this track, if one does.
    listing: Option<Listing>,
    /// The cache's byte budget, if the track has one.
    budget: Option<ByteBudget>,
    /// The relay-wide memory budget its groups are charged to, if any.
    memory: Option<MemoryBudget>,
    /// The retention last set on the group log.
    retained: usize,
}

/// Keeps a track's cache within [`Track::cache_bytes`] by lowering the group log's
/// retention as groups grow.
#[derive(Debug)]
struct ByteBudget {
    limit: u64,
    max_groups: usize,
    /// The sizes of the groups that may still be in the cache, oldest first.
    recent: std::collections::VecDeque<super::group::GroupSize>,
}

impl ByteBudget {
    /// How many of the newest groups fit the budget (at least the newest one).
    fn fit(&self) -> usize {
        let mut total = 0u64;
        let mut count = 0;
        for group in self.recent.iter().rev().take(self.max_groups) {
            total = total.saturating_add(group.bytes());
            if count > 0 && total > self.limit {
                break;
            }
            count += 1;
        }
        count.max(1)
    }
}

/// What a registry that lists a track gives its producer.
pub(crate) struct Listing {
    /// Unlists the track if nobody consumes it, under the registry's lock (the lock it
    /// hands out consumers under); returns whether it did.
    pub(crate) retire_if_unused: Box<dyn Fn() -> bool + Send + Sync>,
    /// Unlists the track when the producer drops.
    pub(crate) on_drop: DropHook,
}

impl std::fmt::Debug for Listing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listing")
            .field("on_drop", &self.on_drop)
            .finish_non_exhaustive()
    }
}

/// Reads a track's groups as they arrive.
#[derive(Debug)]
pub struct TrackConsumer {
    groups: LogReader<GroupConsumer>,
    shared: Arc<TrackShared>,
    _presence: moqx_kio::Consumer<()>,
    /// Groups below this sequence are skipped.
    start: u64,
    lagged: u64,
}

/// Creates consumers of a track without being one: what a broadcast keeps in its list of
/// live tracks, so that listing a track does not count as using it.
#[derive(Debug, Clone)]
pub(crate) struct TrackSource {
    groups: LogHandle<GroupConsumer>,
    shared: Arc<TrackShared>,
    presence: moqx_kio::Producer<()>,
}

#[derive(Debug)]
struct TrackShared {
    track: Track,
    max_latency_ticks: u64,
    status: Status,
    /// One more than the highest first-frame timestamp of any group (0: none yet), shared
    /// with the groups, which raise it when they write their first frame.
    newest_timestamp: Arc<AtomicU64>,
    /// The highest sequence created, or `NONE`.
    latest_sequence: AtomicU64,
    /// The earliest group a subscription asked for (`Some(None)`: the latest); `None`
    /// while only lookups of the track's properties touched it. What an on-demand
    /// track's producer subscribes upstream from ([`TrackProducer::poll_wanted`]).
    wanted: moqx_kio::Producer<Option<Option<u64>>>,
}

const NONE: u64 = u64::MAX;

impl TrackProducer {
    /// A new open track with no groups.
    pub fn new(track: Track) -> Self {
        let max_groups = track.cache_groups.max(1);
        // With a byte budget, small chunks, so that memory is released close to the budget
        // (a chunk goes only once all of its groups are out of the cache).
        let (first_chunk, max_chunk) = match track.cache_bytes {
            Some(_) => (2, 2),
            None => (4, 64),
        };
        let groups = LogWriter::with_config(LogConfig {
            first_chunk,
            max_chunk,
            retain: Some(max_groups),
        });
        let budget = track.cache_bytes.map(|limit| ByteBudget {
            limit,
            max_groups,
            recent: std::collections::VecDeque::new(),
        });
        let shared = Arc::new(TrackShared {
            max_latency_ticks: track.max_latency_ticks(),
            track,
            status: Status::default(),
            newest_timestamp: Arc::new(AtomicU64::new(0)),
            latest_sequence: AtomicU64::new(NONE),
            wanted: moqx_kio::Producer::new(None),
        });
        let source = TrackSource {
            groups: groups.handle(),
            shared,
            presence: moqx_kio::Producer::new(()),
        };
        Self {
            groups,
            source,
            next_sequence: 0,
            listing: None,
            budget,
            memory: None,
            retained: max_groups,
        }
    }

    /// Charges this track's groups to `memory` (see [`MemoryBudget`]): under its pressure
    /// the cache keeps only the newest group, and grows back once the pressure is gone.
    pub fn set_memory_budget(&mut self, memory: MemoryBudget) {
        self.memory = Some(memory);
    }

    /// The track's properties.
    pub fn track(&self) -> &Track {
        &self.source.shared.track
    }

    /// Ready once a subscription wants the track's groups, with the earliest group any
    /// asked for (`None`: the latest). Lookups of the track's properties alone
    /// ([`BroadcastConsumer::track_info`](super::BroadcastConsumer::track_info)) do not
    /// count: a relay answering a TRACK query waits for the SUBSCRIBE that follows before
    /// it subscribes upstream, so that it asks for the groups that SUBSCRIBE wants.
    pub fn poll_wanted(&self, waiter: &Waiter) -> Poll<Option<u64>> {
        match self
            .source
            .shared
            .wanted
            .consume()
            .poll_until(waiter, |wanted| *wanted)
        {
            Poll::Ready(Ok(start)) => Poll::Ready(start),
            // The cell lives as long as the track: never closed while polled here.
            Poll::Ready(Err(_)) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Creates the group after the highest sequence created so far (0 for the first).
    pub fn append_group(&mut self) -> GroupProducer {
        self.create_group(self.next_sequence)
    }

    /// Appends a group of one frame and ends it, in one go (a chat message): its readers,
    /// and a session sending it, see the frame and the end together, so that the group's
    /// stream ends with its bytes ([`GroupProducer::finish_with`]). Returns its sequence.
    pub fn write_group(&mut self, timestamp: u64, payload: impl Into<Bytes>) -> u64 {
        let group = self.append_group();
        let sequence = group.sequence();
        group.finish_with(Frame {
            timestamp,
            payload: payload.into(),
        });
        sequence
    }

    /// Creates a group with this sequence. Sequences may arrive out of order; consumers
    /// receive groups in creation order.
    pub fn create_group(&mut self, sequence: u64) -> GroupProducer {
        let shared = &self.source.shared;
        let group = GroupProducer::new_in_track(
            sequence,
            shared.newest_timestamp.clone(),
            self.budget.is_some(),
            self.memory.clone(),
        );
        self.groups.append(group.consume());
        let mut keep = shared.track.cache_groups.max(1);
        if let Some(budget) = &mut self.budget {
            budget.recent.push_back(group.size());
            keep = budget.fit();
            while budget.recent.len() > keep {
                budget.recent.pop_front();
            }
        }
        // Under the relay's memory pressure the oldest cached groups go first: this track
        // keeps only the group it just started.
        if let Some(memory) = &self.memory
            && memory.under_pressure()
        {
            if self.retained > 1 {
                memory.note_cache_shed();
            }
            keep = 1;
        }
        if keep != self.retained {
            self.retained = keep;
            self.groups.set_retain(Some(keep));
        }
        self.next_sequence = self.next_sequence.max(sequence.saturating_add(1));
        shared
            .latest_sequence
            .store(self.next_sequence - 1, Ordering::Release);
        group
    }

    /// The highest sequence created so far.
    pub fn latest(&self) -> Option<u64> {
        self.source.shared.latest()
    }

    /// A consumer starting at the latest group.
    pub fn consume(&self) -> TrackConsumer {
        self.source.consume()
    }

    /// A consumer starting at group `sequence` (or the oldest cached group after it).
    pub fn consume_from(&self, sequence: u64) -> TrackConsumer {
        self.source.consume_from(sequence)
    }

    /// How many consumers exist.
    pub fn consumer_count(&self) -> usize {
        self.source.presence.consumer_count()
    }

    /// Ready when no consumer exists: nobody wants this track any more.
    pub fn poll_unused(&self, waiter: &Waiter) -> Poll<()> {
        self.source.presence.poll_unused(waiter)
    }

    /// Waits until no consumer exists.
    pub async fn unused(&self) {
        self.source.presence.unused().await
    }

    /// Ready when a consumer exists: someone wants this track.
    pub fn poll_used(&self, waiter: &Waiter) -> Poll<()> {
        self.source.presence.poll_used(waiter)
    }

    /// Waits until a consumer exists.
    pub async fn used(&self) {
        self.source.presence.used().await
    }

    /// Ends the track: consumers read the cached groups, then see the end.
    pub fn finish(self) {
        self.source.shared.status.set(Ok(()));
    }

    /// Ends the track with an error, seen by consumers after the cached groups.
    pub fn abort(self, error: Error) {
        self.source.shared.status.set(Err(error));
    }

    /// What a registry keeps to hand out consumers later.
    pub(crate) fn source(&self) -> TrackSource {
        self.source.clone()
    }

    /// Lists the track in a registry (see [`Listing`]).
    pub(crate) fn set_listing(&mut self, listing: Listing) {
        self.listing = Some(listing);
    }

    /// Stops handing this track to new subscribers if nobody consumes it, and says whether
    /// it did: once it returns `true` no consumer can appear any more (a new subscriber of
    /// the name gets a new track), so the track can be given up.
    ///
    /// [`poll_unused`](Self::poll_unused) alone cannot decide that: a subscriber may take
    /// the listed track between the moment the last consumer left and the moment the
    /// producer acts on it. Here the check and the unlisting happen under the lock the
    /// broadcast hands out consumers under.
    pub fn retire_if_unused(&self) -> bool {
        match &self.listing {
            Some(listing) => (listing.retire_if_unused)(),
            None => self.consumer_count() == 0,
        }
    }
}

impl Drop for TrackProducer {
    fn drop(&mut self) {
        // First outcome wins; the group log closes and the registration hook runs when the
        // fields drop, right after.
        self.source.shared.status.set(Err(Error::Dropped));
    }
}

impl TrackSource {
    /// How many consumers exist.
    pub(crate) fn consumer_count(&self) -> usize {
        self.presence.consumer_count()
    }

    /// A consumer starting at the latest group.
    pub(crate) fn consume(&self) -> TrackConsumer {
        // Find the cached group with the highest sequence: joining is rare and the cache is
        // small, so a scan beats an index the writer would maintain on every group.
        let mut scan = self.groups.reader(Start::Oldest);
        let mut best: Option<(u64, u64)> = None;
        let mut position = scan.position();
        while let Some(next) = scan.try_next() {
            match next {
                Next::Item(group) => {
                    if best.is_none_or(|(sequence, _)| group.sequence() > sequence) {
                        best = Some((group.sequence(), position));
                    }
                }
                Next::Lagged(_) => {}
                // A log whose writer is gone says so at its end on every call: the scan
                // is over (it used to go on asking forever, spinning its thread, when a
                // subscriber joined a track as it ended).
                Next::Closed => break,
            }
            position = scan.position();
        }
        // Start at that group's place in the log *and* at its sequence: a group that
        // arrives later with a lower sequence (groups travel on their own streams and may
        // be created out of order) is older than where this consumer starts.
        match best {
            Some((sequence, at)) => self.consumer(scan.reader(Start::At(at)), sequence),
            None => self.consumer(scan.reader(Start::At(position)), 0),
        }
    }

    /// A consumer starting at group `sequence` (or the oldest cached group after it).
    pub(crate) fn consume_from(&self, sequence: u64) -> TrackConsumer {
        self.consumer(self.groups.reader(Start::Oldest), sequence)
    }

    /// Whether both sources are the same track (not merely the same name).
    pub(crate) fn same_track(&self, other: &TrackSource) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Records that a subscription wants the track's groups from `start` (`None`: the
    /// latest); see [`TrackProducer::poll_wanted`].
    pub(crate) fn mark_wanted(&self, start: Option<u64>) {
        self.shared.wanted.update(|wanted| {
            *wanted = Some(match *wanted {
                None => start,
                Some(Some(previous)) => Some(start.map_or(previous, |s| s.min(previous))),
                Some(None) => start,
            });
        });
    }

    /// A counted consumer reference that creates no reader: holding it keeps the track in use.
    pub(crate) fn hold(&self) -> moqx_kio::Consumer<()> {
        self.presence.consume()
    }

    fn consumer(&self, groups: LogReader<GroupConsumer>, start: u64) -> TrackConsumer {
        TrackConsumer {
            groups,
            shared: self.shared.clone(),
            _presence: self.presence.consume(),
            start,
            lagged: 0,
        }
    }
}

impl TrackConsumer {
    /// Another consumer of the same track, starting at group `sequence` (or the oldest
    /// cached group after it): what a subscription with an explicit start uses.
    pub fn consume_from(&self, sequence: u64) -> TrackConsumer {
        TrackConsumer {
            groups: self.groups.reader(Start::Oldest),
            shared: self.shared.clone(),
            _presence: self._presence.clone(),
            start: sequence,
            lagged: 0,
        }
    }

    /// The track's properties.
    pub fn track(&self) -> &Track {
        &self.shared.track
    }

    /// The highest sequence created so far.
    pub fn latest(&self) -> Option<u64> {
        self.shared.latest()
    }

    /// How many groups this consumer skipped because it read too slowly (the cache released
    /// them) or because they expired before it reached them.
    pub fn lagged(&self) -> u64 {
        self.lagged
    }

    /// The next group to deliver; `Ok(None)` once a finished track has no more; the track's
    /// error if it was aborted or dropped.
    pub fn poll_next_group(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<Option<GroupConsumer>, Error>> {
        self.next_group_with(waiter)
    }

    fn next_group_with<'w>(
        &mut self,
        park: impl Park<'w>,
    ) -> Poll<Result<Option<GroupConsumer>, Error>> {
        loop {
            let group = match park.read(&mut self.groups) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Next::Item(group)) => group,
                Poll::Ready(Next::Lagged(skipped)) => {
                    self.lagged += skipped;
                    continue;
                }
                Poll::Ready(Next::Closed) => {
                    return Poll::Ready(match self.shared.status.get() {
                        Some(Ok(())) => Ok(None),
                        Some(Err(error)) => Err(error),
                        None => Err(Error::Dropped),
                    });
                }
            };
            if group.sequence() < self.start {
                continue;
            }
            if self.shared.expired(group) {
                self.lagged += 1;
                continue;
            }
            return Poll::Ready(Ok(Some(group.clone())));
        }
    }

    /// Waits for the next group.
    pub async fn next_group(&mut self) -> Result<Option<GroupConsumer>, Error> {
        // A group that is already there costs no waiter (an allocation); see `Park`.
        if let Poll::Ready(result) = self.next_group_with(Look) {
            return result;
        }
        moqx_kio::wait(|waiter| self.poll_next_group(waiter)).await
    }
}

impl Clone for TrackConsumer {
    /// A consumer at the same position, counted as another consumer of the track.
    fn clone(&self) -> Self {
        Self {
            groups: self.groups.clone(),
            shared: self.shared.clone(),
            _presence: self._presence.clone(),
            start: self.start,
            lagged: self.lagged,
        }
    }
}

impl TrackShared {
    fn latest(&self) -> Option<u64> {
        match self.latest_sequence.load(Ordering::Acquire) {
            NONE => None,
            sequence => Some(sequence),
        }
    }

    /// Timestamp age (spec: moq-lite, "Expiration"): a group is expired once a newer group
    /// exists and its first timestamp trails the newest first timestamp by more than the
    /// track's max latency. The latest group and groups without frames never expire here.
    fn expired(&self, group: &GroupConsumer) -> bool {
        if self.latest() == Some(group.sequence()) {
            return false;
        }
        let Some(first) = group.first_timestamp() else {
            return false;
        };
        match self.newest_timestamp.load(Ordering::Acquire) {
            0 => false,
            newest_plus_one => (newest_plus_one - 1).saturating_sub(first) > self.max_latency_ticks,
        }
    }
}

#[cfg(test)]
#[path = "track_tests.rs"]
mod tests;
