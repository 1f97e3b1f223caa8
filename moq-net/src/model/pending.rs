//! The announcements waiting for one origin listener, coalesced by path.
//!
//! A listener that does not read (its peer withholds flow control on an announce stream)
//! must not make the origin hold every change since: while a path has a change waiting,
//! a newer change of that path replaces it in place. So a listener holds at most one
//! waiting change per path, however often paths come and go.
//!
//! Replacing keeps what the listener must hear. A change is delivered as the path's state
//! now (active with this broadcast, or ended), and an end only to a listener that was told
//! the path was active: each waiting change remembers whether the path was active, as the
//! listener last heard it, before the change. A path that came and went unseen is not
//! mentioned at all, and is forgotten at once: a listener holds at most one entry per path
//! it must still hear about, never one per path that ever changed (review finding F1: a
//! stalled listener and a peer churning fresh names grew the relay by ~200 MB/s).

use std::collections::{HashMap, VecDeque};
use std::task::Poll;

use moqx_kio::sync::Mutex;
use moqx_kio::{Waiter, WaiterSlot};

use super::broadcast::BroadcastSource;
use super::budget::{ANNOUNCEMENT_OVERHEAD, MemoryBudget};
use super::path::Path;

/// One listener's waiting announcements. Shared between the origin, which pushes under
/// its own lock, and the listener, which pops.
#[derive(Debug)]
pub(crate) struct PendingAnnouncements {
    state: Mutex<State>,
    /// What each waiting change is charged to (its path and bookkeeping).
    memory: Option<MemoryBudget>,
}

#[derive(Debug, Default)]
struct State {
    /// Bytes charged to the memory budget for the changes now waiting.
    charged: u64,
    /// Paths with a waiting change, in the order their first waiting change happened,
    /// each with the change's ticket. An entry whose ticket is no longer its path's
    /// (the change was forgotten) is stale: skipped when popped, and dropped when stale
    /// entries outnumber live ones, so the queue stays within twice `changes` (plus a
    /// constant) at an amortized O(1) per push.
    order: VecDeque<(u64, Path)>,
    changes: HashMap<Path, Change>,
    next_ticket: u64,
    reader: WaiterSlot,
}

#[derive(Debug)]
struct Change {
    /// Matches this change's entry in `order`.
    ticket: u64,
    /// Whether the listener, as of what it was told, believes the path active.
    known_active: bool,
    /// The path's state now: its active broadcast, or `None` for ended.
    active: Option<BroadcastSource>,
}

impl PendingAnnouncements {
    /// No waiting changes; each one charged to `memory`, if given.
    pub(crate) fn new(memory: Option<MemoryBudget>) -> Self {
        Self {
            state: Mutex::default(),
            memory,
        }
    }

    /// What one waiting change of `path` is charged.
    fn cost(path: &Path) -> u64 {
        ANNOUNCEMENT_OVERHEAD + path.as_str().len() as u64
    }

    fn charge(&self, state: &mut State, path: &Path) {
        if let Some(memory) = &self.memory {
            let cost = Self::cost(path);
            state.charged += cost;
            memory.charge(cost);
        }
    }

    fn release(&self, state: &mut State, path: &Path) {
        if let Some(memory) = &self.memory {
            let cost = Self::cost(path).min(state.charged);
            state.charged -= cost;
            memory.release(cost);
        }
    }

    /// Records that `path` is now served by `active` (or ended, for `None`); `was_active`
    /// says whether it was active just before this change. Wakes the listener.
    pub(crate) fn push(&self, path: &Path, was_active: bool, active: Option<BroadcastSource>) {
        let mut state = self.state.lock();
        match state.changes.get_mut(path) {
            // Came and went while the listener was not looking: nothing to say, forgotten.
            Some(change) if !change.known_active && active.is_none() => {
                state.changes.remove(path);
                self.release(&mut state, path);
                state.compact();
                return;
            }
            Some(change) => change.active = active,
            // Nothing the listener would have to hear (it never knew the path active).
            None if !was_active && active.is_none() => return,
            None => {
                let ticket = state.next_ticket;
                state.next_ticket += 1;
                state.changes.insert(
                    path.clone(),
                    Change {
                        ticket,
                        known_active: was_active,
                        active,
                    },
                );
                state.order.push_back((ticket, path.clone()));
                self.charge(&mut state, path);
            }
        }
        let wake = state.reader.take();
        drop(state);
        if let Some(wake) = wake {
            wake.wake();
        }
    }

    /// The oldest waiting change worth telling: a path and its broadcast, or `None` for
    /// ended.
    pub(crate) fn try_pop(&self) -> Option<(Path, Option<BroadcastSource>)> {
        let mut state = self.state.lock();
        self.pop_locked(&mut state)
    }

    /// Like [`try_pop`](Self::try_pop), parking `waiter` when nothing is waiting.
    pub(crate) fn poll_pop(&self, waiter: &Waiter) -> Poll<(Path, Option<BroadcastSource>)> {
        let mut state = self.state.lock();
        match self.pop_locked(&mut state) {
            Some(change) => Poll::Ready(change),
            None => {
                state.reader.register(waiter);
                Poll::Pending
            }
        }
    }

    /// How many paths have a change waiting: each has something to tell.
    pub(crate) fn len(&self) -> usize {
        self.state.lock().changes.len()
    }

    /// Entries in the queue of paths, stale ones included: at most twice [`len`](Self::len)
    /// plus a constant.
    #[cfg(test)]
    fn queued(&self) -> usize {
        self.state.lock().order.len()
    }

    fn pop_locked(&self, state: &mut State) -> Option<(Path, Option<BroadcastSource>)> {
        while let Some((ticket, path)) = state.order.pop_front() {
            if state
                .changes
                .get(&path)
                .is_none_or(|change| change.ticket != ticket)
            {
                continue; // stale: that change was forgotten
            }
            let change = state.changes.remove(&path)?;
            self.release(state, &path);
            return Some((path, change.active));
        }
        None
    }
}

impl Drop for PendingAnnouncements {
    fn drop(&mut self) {
        if let Some(memory) = &self.memory {
            memory.release(self.state.lock().charged);
        }
    }
}

impl State {
    /// Stale entries in `order` that may stay before they are swept.
    const STALE_SLACK: usize = 64;

    /// Drops the stale entries of `order` once they outnumber the live ones.
    fn compact(&mut self) {
        if self.order.len() <= 2 * self.changes.len() + Self::STALE_SLACK {
            return;
        }
        let changes = &self.changes;
        self.order.retain(|(ticket, path)| {
            changes
                .get(path)
                .is_some_and(|change| change.ticket == *ticket)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BroadcastProducer;

    fn drain(pending: &PendingAnnouncements) -> Vec<String> {
        std::iter::from_fn(|| pending.try_pop())
            .map(|(path, active)| match active {
                Some(_) => format!("+{path}"),
                None => format!("-{path}"),
            })
            .collect()
    }

    #[test]
    fn changes_of_one_path_coalesce_into_its_state_now() {
        let pending = PendingAnnouncements::new(None);
        let a = BroadcastProducer::new();
        let b = BroadcastProducer::new();
        // Unseen: `x` came and went, `y` came, went and came back.
        pending.push(&"x".into(), false, Some(a.source()));
        pending.push(&"y".into(), false, Some(a.source()));
        pending.push(&"x".into(), true, None);
        pending.push(&"y".into(), true, None);
        pending.push(&"y".into(), false, Some(b.source()));
        // `z` was known active: its end is told, even after a restart came and went.
        pending.push(&"z".into(), true, None);
        assert_eq!(pending.len(), 2, "the unseen `x` is forgotten");
        assert_eq!(drain(&pending), ["+y", "-z"]);
    }

    /// Review finding F1: every distinct path announced and withdrawn while the listener
    /// did not read kept an entry, without limit.
    #[test]
    fn a_million_distinct_paths_that_came_and_went_unseen_hold_nothing() {
        let pending = PendingAnnouncements::new(None);
        let a = BroadcastProducer::new();
        let kept = Path::new("kept");
        pending.push(&kept, false, Some(a.source()));
        for index in 0..1_000_000 {
            let path = Path::new(format!("churn/{index}"));
            pending.push(&path, false, Some(a.source()));
            pending.push(&path, true, None);
            assert!(pending.queued() <= 2 * pending.len() + State::STALE_SLACK);
        }
        assert_eq!(pending.len(), 1);
        assert_eq!(drain(&pending), ["+kept"]);
    }

    /// A path forgotten and announced again is told once, at its new place in the order.
    #[test]
    fn a_path_forgotten_and_announced_again_keeps_the_order_of_changes() {
        let pending = PendingAnnouncements::new(None);
        let a = BroadcastProducer::new();
        pending.push(&"x".into(), false, Some(a.source()));
        pending.push(&"y".into(), false, Some(a.source()));
        pending.push(&"x".into(), true, None);
        pending.push(&"z".into(), false, Some(a.source()));
        pending.push(&"x".into(), false, Some(a.source()));
        assert_eq!(drain(&pending), ["+y", "+z", "+x"]);
    }

    #[test]
    fn a_path_flapping_a_million_times_holds_at_most_one_change() {
        let pending = PendingAnnouncements::new(None);
        let a = BroadcastProducer::new();
        let path = Path::new("flap");
        for _ in 0..1_000_000 {
            pending.push(&path, false, Some(a.source()));
            assert_eq!(pending.len(), 1);
            pending.push(&path, true, None);
            assert!(pending.queued() <= 1 + State::STALE_SLACK);
        }
        assert_eq!(pending.len(), 0);
        assert_eq!(drain(&pending), Vec::<String>::new());
    }

    #[test]
    fn a_parked_reader_is_woken_by_a_push() {
        struct Count(std::sync::atomic::AtomicUsize);
        impl std::task::Wake for Count {
            fn wake(self: std::sync::Arc<Self>) {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let count = std::sync::Arc::new(Count(Default::default()));
        let waiter = Waiter::new(&std::task::Waker::from(count.clone()));
        let pending = PendingAnnouncements::new(None);
        assert!(pending.poll_pop(&waiter).is_pending());
        pending.push(&"p".into(), false, Some(BroadcastProducer::new().source()));
        assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(pending.poll_pop(&waiter).is_ready());
    }
}
