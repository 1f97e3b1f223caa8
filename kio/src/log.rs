//! An append-only log whose readers take no lock: the fanout primitive.
//!
//! One [`LogWriter`] appends; any number of [`LogReader`]s, on any threads, read every entry in
//! order from wherever they joined. This is what a group's frames and a track's groups are
//! stored in, so that a relay can hand one published message to thousands of subscribers
//! without the subscribers contending with the publisher or with each other.
//!
//! # Why it is written by hand
//!
//! Channels (tokio's `broadcast`, crossbeam) either take a lock per read or copy per reader,
//! and `RwLock`-guarded vectors make every reader write the lock's reader count: the shared
//! cache line that made a relay's CPU bimodal (DESIGN.md, "Fanout lock contention"). No
//! well-kept crate offers a single-writer, many-reader, poll-based log with bounded
//! retention, so this is one, with loom models for every ordering it relies on.
//!
//! # How it works
//!
//! Entries live in *chunks*: fixed arrays that never move once allocated. Chunk sizes start
//! small (a chat group holds one frame) and double up to a limit. The writer fills a slot, then
//! publishes it by storing the chunk's length with `Release`; a reader loads the length with
//! `Acquire` and then reads slots below it through shared references. Reading an entry only
//! *loads* shared atomics, so readers never invalidate each other's cache lines per entry;
//! they write shared state only once per chunk (a reference count, when moving to the next
//! chunk) and when they park (the waiter list).
//!
//! A full chunk links to the next by a weak reference. The log keeps recent chunks alive for
//! late joiners (all of them, or about the last [`LogConfig::retain`] entries), and each reader
//! keeps only the chunk it is reading. A reader that falls so far behind that the next chunk
//! was already released observes [`Next::Lagged`] and skips to the oldest retained entry: a
//! slow reader costs at most one chunk of memory, never the whole backlog.
//!
//! The only lock is taken when the writer starts a new chunk, when a reader joins or lags,
//! and by the [`WaiterList`] when a reader that has caught up parks.
//!
//! ```
//! use moqx_kio::log::{LogWriter, Next, Start};
//!
//! let mut writer = LogWriter::new();
//! writer.append("hello");
//! let mut late = writer.reader(Start::Oldest);
//! writer.append("world");
//! writer.close();
//!
//! let mut seen = Vec::new();
//! while let Some(Next::Item(text)) = late.try_next() {
//!     seen.push(*text);
//! }
//! assert_eq!(seen, ["hello", "world"]);
//! assert!(matches!(late.try_next(), Some(Next::Closed)));
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::mem::MaybeUninit;
use std::task::Poll;

use crate::sync::weak::{Arc as ChunkArc, Weak as ChunkWeak};
use crate::sync::{Arc, AtomicBool, AtomicUsize, Mutex, Ordering, UnsafeCell};
use crate::{Waiter, WaiterList, wait};

/// How a log allocates and how much it keeps for late joiners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    /// Slots in the first chunk. Small keeps short logs cheap (a chat group holds one frame).
    pub first_chunk: usize,
    /// The largest chunk; chunk sizes double from `first_chunk` up to this.
    pub max_chunk: usize,
    /// Keep at least this many recent entries for late joiners and slow readers, releasing
    /// older chunks. `None` keeps everything until the log is dropped. Memory is released a
    /// chunk at a time, so up to `max_chunk` more entries may still be stored; new readers
    /// start within the last `retain` entries all the same ([`Start::Oldest`]).
    pub retain: Option<usize>,
}

/// The single writer of a log. Dropping it closes the log.
pub struct LogWriter<T> {
    shared: Arc<Shared<T>>,
    tail: ChunkArc<Chunk<T>>,
    /// The writer's own copy of `tail.len`, so appending never loads the shared atomic.
    tail_len: usize,
}

/// A reader of a log, at a position. Cloning gives a reader at the same position.
pub struct LogReader<T> {
    shared: Arc<Shared<T>>,
    chunk: ChunkArc<Chunk<T>>,
    offset: usize,
}

/// Creates readers of a log without being one: it holds no position and pins no chunk.
///
/// Keep one where readers are handed out later (a registry of live tracks, say) without
/// keeping a chunk alive the way an idle [`LogReader`] would. It does keep the log's retained
/// entries alive, like any reader, after the writer is gone.
pub struct LogHandle<T> {
    shared: Arc<Shared<T>>,
}

/// What a reader found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next<T> {
    /// The next entry.
    Item(T),
    /// The reader fell behind retention and skipped this many entries to the oldest one
    /// still retained. Reading continues from there.
    Lagged(u64),
    /// The log is closed and the reader has seen every entry.
    Closed,
}

/// Where a new reader starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// At the oldest retained entry.
    Oldest,
    /// At the most recent entry (the next one appended if the log is empty).
    Latest,
    /// After every existing entry: only entries appended from now on.
    Next,
    /// At this position, clamped into the retained range.
    At(u64),
}

impl LogConfig {
    /// One slot first, doubling to 64, everything retained.
    pub const DEFAULT: Self = Self {
        first_chunk: 1,
        max_chunk: 64,
        retain: None,
    };
}

impl Default for LogConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl<T> LogWriter<T> {
    /// An empty open log with [`LogConfig::DEFAULT`].
    pub fn new() -> Self {
        Self::with_config(LogConfig::DEFAULT)
    }

    /// An empty open log.
    ///
    /// # Panics
    ///
    /// If `config.first_chunk` is 0, `config.max_chunk` is smaller than `first_chunk`, or
    /// `config.retain` is `Some(0)` (a log must keep at least its latest entry).
    pub fn with_config(config: LogConfig) -> Self {
        assert!(
            config.first_chunk > 0,
            "moqx_kio::log::LogConfig::first_chunk must be at least 1"
        );
        assert!(
            config.max_chunk >= config.first_chunk,
            "moqx_kio::log::LogConfig::max_chunk ({}) must be at least first_chunk ({})",
            config.max_chunk,
            config.first_chunk
        );
        assert!(
            config.retain != Some(0),
            "moqx_kio::log::LogConfig::retain must be at least 1 (or None to keep everything)"
        );
        let tail = ChunkArc::new(Chunk::new(0, config.first_chunk));
        let shared = Arc::new(Shared {
            retained: Mutex::new(Retained {
                chunks: VecDeque::from([tail.clone()]),
                retain: config.retain,
            }),
            config,
            waiters: WaiterList::new(),
            closed: AtomicBool::new(false),
        });
        Self {
            shared,
            tail,
            tail_len: 0,
        }
    }

    /// Appends `value`, wakes parked readers, and returns its position (0 for the first entry).
    pub fn append(&mut self, value: T) -> u64 {
        let position = self.publish(value);
        self.shared.waiters.wake_all();
        position
    }

    /// Appends `value` without waking parked readers, for a writer about to close the
    /// log: the close ([`close`](Self::close), or dropping the writer) wakes them once,
    /// and a reader woken by it sees the entry and the end together (one that happens to
    /// be reading between the two may still see the entry first, then the end). Until the
    /// close, a parked reader does not learn of the entry.
    pub fn append_before_close(&mut self, value: T) -> u64 {
        self.publish(value)
    }

    /// Appends `value` where readers find it, without waking them.
    fn publish(&mut self, value: T) -> u64 {
        if self.tail_len == self.tail.capacity() {
            self.start_chunk();
        }
        let index = self.tail_len;
        self.tail.slots[index].with_mut(|slot| {
            // SAFETY: only the writer writes slots, and slot `index` is unpublished
            // (`tail.len == index`), so no reader can be reading it.
            unsafe { (*slot).write(value) };
        });
        self.tail_len += 1;
        self.tail.len.store(self.tail_len, Ordering::Release);
        self.tail.start + index as u64
    }

    /// The number of entries ever appended; the position the next one gets.
    pub fn len(&self) -> u64 {
        self.tail.start + self.tail_len as u64
    }

    /// Whether nothing was ever appended.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A new reader.
    pub fn reader(&self, start: Start) -> LogReader<T> {
        LogReader::join(self.shared.clone(), start)
    }

    /// A handle that creates readers later.
    pub fn handle(&self) -> LogHandle<T> {
        LogHandle {
            shared: self.shared.clone(),
        }
    }

    /// Closes the log: readers see [`Next::Closed`] after the last entry. Same as dropping.
    pub fn close(self) {}

    fn start_chunk(&mut self) {
        let config = &self.shared.config;
        let capacity = (self.tail.capacity() * 2).min(config.max_chunk);
        let start = self.len();
        let next = ChunkArc::new(Chunk::new(start, capacity));
        self.tail.next.with_mut(|link| {
            // SAFETY: the link is written once, here, by the writer, before `has_next`
            // publishes it; readers read it only after observing `has_next`.
            unsafe { *link = Some(ChunkArc::downgrade(&next)) };
        });
        self.tail.has_next.store(true, Ordering::Release);

        let mut retained = self.shared.retained.lock();
        retained.chunks.push_back(next.clone());
        let evicted = retained.evict(start);
        drop(retained);
        // Entries' destructors run after the lock is released.
        drop(evicted);
        self.tail = next;
        self.tail_len = 0;
    }

    /// Changes how many recent entries are kept ([`LogConfig::retain`]; `Some(0)` counts as
    /// `Some(1)`: the latest entry is always kept). Chunks wholly older than the new bound
    /// are released now; readers already in them keep reading, new readers start within it.
    pub fn set_retain(&mut self, retain: Option<usize>) {
        let len = self.len();
        let mut retained = self.shared.retained.lock();
        retained.retain = retain.map(|n| n.max(1));
        let evicted = retained.evict(len);
        drop(retained);
        drop(evicted);
    }
}

impl<T> Default for LogWriter<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for LogWriter<T> {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.waiters.wake_all();
    }
}

impl<T> fmt::Debug for LogWriter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogWriter")
            .field("len", &self.len())
            .field("config", &self.shared.config)
            .finish()
    }
}

impl<T> LogHandle<T> {
    /// A new reader.
    pub fn reader(&self, start: Start) -> LogReader<T> {
        LogReader::join(self.shared.clone(), start)
    }

    /// Whether the writer has closed the log.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }
}

impl<T> Clone for LogHandle<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T> fmt::Debug for LogHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogHandle")
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl<T> LogReader<T> {
    /// A new reader of the same log, starting at `start`.
    pub fn reader(&self, start: Start) -> LogReader<T> {
        Self::join(self.shared.clone(), start)
    }

    /// The position of the next entry this reader returns.
    pub fn position(&self) -> u64 {
        self.chunk.start + self.offset as u64
    }

    /// Whether the writer has closed the log (entries may remain unread).
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// The next entry if one is available now; `None` if the reader has caught up with an open
    /// log. Never registers a waiter.
    pub fn try_next(&mut self) -> Option<Next<&T>> {
        let step = self.step();
        self.output(step)
    }

    /// The next entry, or `Pending` after registering `waiter` to be woken by the next append
    /// or by the close.
    pub fn poll_next(&mut self, waiter: &Waiter) -> Poll<Next<&T>> {
        let mut step = self.step();
        if let Step::CaughtUp = step {
            self.shared.waiters.register(waiter);
            // An append or close that raced the check above is seen here; one after the
            // registration wakes the waiter.
            step = self.step();
        }
        match self.output(step) {
            Some(next) => Poll::Ready(next),
            None => Poll::Pending,
        }
    }

    /// Waits for the next entry and clones it out.
    pub async fn next(&mut self) -> Next<T>
    where
        T: Clone,
    {
        wait(|waiter| self.poll_next(waiter).map(Next::cloned)).await
    }

    fn join(shared: Arc<Shared<T>>, start: Start) -> Self {
        let retained = shared.retained.lock();
        let chunks = &retained.chunks;
        let (Some(front), Some(tail)) = (chunks.front(), chunks.back()) else {
            unreachable!("a log always retains its tail chunk");
        };
        let end = tail.start + tail.len.load(Ordering::Acquire) as u64;
        let oldest = match retained.retain {
            Some(retain) => front.start.max(end.saturating_sub(retain as u64)),
            None => front.start,
        };
        let position = match start {
            Start::Oldest => oldest,
            Start::Latest => end.saturating_sub(1).max(oldest),
            Start::Next => end,
            Start::At(position) => position.clamp(oldest, end),
        };
        // The last chunk starting at or before `position`; the front one always qualifies.
        let index = chunks
            .partition_point(|chunk| chunk.start <= position)
            .max(1)
            - 1;
        let chunk = chunks[index].clone();
        drop(retained);
        let offset = (position - chunk.start) as usize;
        Self {
            shared,
            chunk,
            offset,
        }
    }

    /// Moves to the next readable entry without registering anything.
    fn step(&mut self) -> Step {
        // Read `closed` first: if it is set, every append happened before it, so the walk
        // below sees all of them and "caught up" really means the end.
        let closed = self.shared.closed.load(Ordering::Acquire);
        loop {
            let len = self.chunk.len.load(Ordering::Acquire);
            if self.offset < len {
                self.offset += 1;
                return Step::Item(self.offset - 1);
            }
            let exhausted = self.offset == self.chunk.capacity();
            if !exhausted || !self.chunk.has_next.load(Ordering::Acquire) {
                return if closed { Step::Closed } else { Step::CaughtUp };
            }
            let next = self.chunk.next.with(|link| {
                // SAFETY: `has_next` was observed with Acquire, so the writer's single write
                // of the link happened before this read, and it is never written again.
                unsafe { (*link).as_ref().and_then(ChunkWeak::upgrade) }
            });
            match next {
                Some(next) => {
                    self.chunk = next;
                    self.offset = 0;
                }
                None => {
                    // The next chunk was released: this reader fell behind retention.
                    let behind = self.position();
                    *self = Self::join(self.shared.clone(), Start::Oldest);
                    return Step::Lagged(self.position().saturating_sub(behind));
                }
            }
        }
    }

    fn output(&self, step: Step) -> Option<Next<&T>> {
        match step {
            Step::Item(index) => Some(Next::Item(self.chunk.entry(index))),
            Step::Lagged(skipped) => Some(Next::Lagged(skipped)),
            Step::Closed => Some(Next::Closed),
            Step::CaughtUp => None,
        }
    }
}

impl<T> Clone for LogReader<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            chunk: self.chunk.clone(),
            offset: self.offset,
        }
    }
}

impl<T> fmt::Debug for LogReader<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogReader")
            .field("position", &self.position())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl<T> Next<&T> {
    /// Clones the entry out of the log.
    pub fn cloned(self) -> Next<T>
    where
        T: Clone,
    {
        match self {
            Next::Item(item) => Next::Item(item.clone()),
            Next::Lagged(skipped) => Next::Lagged(skipped),
            Next::Closed => Next::Closed,
        }
    }
}

enum Step {
    Item(usize),
    Lagged(u64),
    Closed,
    CaughtUp,
}

struct Shared<T> {
    /// The retained chunks, and how many entries to retain.
    retained: Mutex<Retained<T>>,
    config: LogConfig,
    waiters: WaiterList,
    closed: AtomicBool,
}

/// What the log keeps for late joiners; changed only under its lock.
struct Retained<T> {
    /// Oldest first; the back is always the writer's tail.
    chunks: VecDeque<ChunkArc<Chunk<T>>>,
    /// The current [`LogConfig::retain`] ([`LogWriter::set_retain`] changes it).
    retain: Option<usize>,
}

impl<T> Retained<T> {
    /// Pops the chunks that lie wholly before the last `retain` entries of a log `len`
    /// long (never the tail); the caller drops them after releasing the lock.
    fn evict(&mut self, len: u64) -> Vec<ChunkArc<Chunk<T>>> {
        let mut evicted = Vec::new();
        if let Some(retain) = self.retain {
            let keep_from = len.saturating_sub(retain as u64);
            while self.chunks.len() > 1 && self.chunks.front().is_some_and(|c| c.end() <= keep_from)
            {
                evicted.extend(self.chunks.pop_front());
            }
        }
        evicted
    }
}

struct Chunk<T> {
    /// Position of `slots[0]` in the log.
    start: u64,
    /// Published slots; only the writer stores it.
    len: AtomicUsize,
    /// Set once `next` holds the link to the following chunk.
    has_next: AtomicBool,
    next: UnsafeCell<Option<ChunkWeak<Chunk<T>>>>,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

// SAFETY: a chunk hands out `&T` to readers on any thread (needs `T: Sync`) and receives and
// drops values moved from the writer's thread (needs `T: Send`). Its cells are written only
// by the single writer before publication (see `append` and `start_chunk`).
unsafe impl<T: Send + Sync> Send for Chunk<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for Chunk<T> {}

impl<T> Chunk<T> {
    fn new(start: u64, capacity: usize) -> Self {
        Self {
            start,
            len: AtomicUsize::new(0),
            has_next: AtomicBool::new(false),
            next: UnsafeCell::new(None),
            slots: (0..capacity)
                .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                .collect(),
        }
    }

    fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// One past the last position this chunk can hold.
    fn end(&self) -> u64 {
        self.start + self.capacity() as u64
    }

    /// A published entry. The caller has observed `len > index` with Acquire.
    fn entry(&self, index: usize) -> &T {
        self.slots[index].with(|slot| {
            // SAFETY: slots below the published length are initialized and never written
            // again until the chunk drops, and the returned reference borrows the chunk.
            unsafe { (*slot).assume_init_ref() }
        })
    }
}

impl<T> Drop for Chunk<T> {
    fn drop(&mut self) {
        let len = self.len.load(Ordering::Acquire);
        for slot in &self.slots[..len] {
            slot.with_mut(|slot| {
                // SAFETY: the first `len` slots were initialized by the writer, and `&mut
                // self` means no reader holds a reference any more.
                unsafe { (*slot).assume_init_drop() }
            });
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
