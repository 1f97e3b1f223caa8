//! The sub-machines of a session (one per stream), and which of them need polling.
//!
//! A session serves thousands of streams; polling all of them whenever one is woken would
//! make every message cost O(streams). Instead each sub-machine owns a [`Waiter`] whose waker
//! records the sub-machine's slot in a ready list and wakes the session, and the session
//! polls only the slots in that list. (This is what `FuturesUnordered` does for futures; the
//! sub-machines here are named state machines that also take the session's context, so the
//! bookkeeping is written out.)

use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};

use moqx_kio::Waiter;

/// A set of sub-machines with a ready list.
pub(crate) struct TaskSet<T> {
    /// Slots keep their waiter when their sub-machine finishes, for the next one: a stream
    /// per group would otherwise allocate a waker and a waiter per group.
    slots: Vec<Slot<T>>,
    free: Vec<usize>,
    ready: Arc<ReadyList>,
    /// The list handed out by the last `drain_ready`, given back to the ready list next time
    /// so that neither allocates in the steady state.
    spare: Vec<usize>,
    len: usize,
}

struct Slot<T> {
    task: Option<T>,
    waiter: Waiter,
}

struct ReadyList {
    state: Mutex<ReadyState>,
}

#[derive(Default)]
struct ReadyState {
    indices: Vec<usize>,
    /// The session's waker, woken when a sub-machine becomes ready.
    parent: Option<Waker>,
}

struct SlotWaker {
    index: usize,
    ready: Arc<ReadyList>,
}

impl<T> TaskSet<T> {
    pub(crate) fn new() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            ready: Arc::new(ReadyList {
                state: Mutex::new(ReadyState::default()),
            }),
            spare: Vec::new(),
            len: 0,
        }
    }

    /// How many sub-machines are running.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Adds a sub-machine, returning its index; it is polled on the next
    /// [`drain_ready`](Self::drain_ready).
    ///
    /// A reused slot keeps its waiter. Registrations the previous sub-machine left behind
    /// may wake the new one once for nothing, which costs a poll and nothing else.
    pub(crate) fn push(&mut self, task: T) -> usize {
        let index = match self.free.pop() {
            Some(index) => {
                self.slots[index].task = Some(task);
                index
            }
            None => {
                let index = self.slots.len();
                if index == self.slots.capacity() {
                    // A session's slots live as long as it does and a slot is a few
                    // hundred bytes: grow by a quarter, not the doubling `push` would do
                    // (a chat member's session holds about 20 slots; doubling left it
                    // room for 32).
                    self.slots.reserve_exact((index / 4).max(4));
                }
                let waker = Waker::from(Arc::new(SlotWaker {
                    index,
                    ready: self.ready.clone(),
                }));
                self.slots.push(Slot {
                    task: Some(task),
                    waiter: Waiter::new(&waker),
                });
                index
            }
        };
        self.len += 1;
        self.ready.lock().indices.push(index);
        index
    }

    /// Records the session's waker, then takes the indices of the ready sub-machines. Give
    /// the vector back with [`recycle`](Self::recycle) when done with it.
    pub(crate) fn drain_ready(&mut self, parent: &Waker) -> Vec<usize> {
        let mut spare = std::mem::take(&mut self.spare);
        spare.clear();
        let mut state = self.ready.lock();
        if !state.parent.as_ref().is_some_and(|p| p.will_wake(parent)) {
            state.parent = Some(parent.clone());
        }
        std::mem::swap(&mut spare, &mut state.indices);
        spare
    }

    /// Takes back a vector [`drain_ready`](Self::drain_ready) handed out.
    pub(crate) fn recycle(&mut self, ready: Vec<usize>) {
        self.spare = ready;
    }

    /// The sub-machine in slot `index` and its waiter, if it still runs.
    pub(crate) fn get_mut(&mut self, index: usize) -> Option<(&mut T, &Waiter)> {
        let slot = self.slots.get_mut(index)?;
        let task = slot.task.as_mut()?;
        Some((task, &slot.waiter))
    }

    /// Takes the sub-machine in slot `index` out of the set (it finished).
    pub(crate) fn remove(&mut self, index: usize) -> Option<T> {
        let task = self.slots.get_mut(index)?.task.take()?;
        self.free.push(index);
        self.len -= 1;
        Some(task)
    }

    /// Drops the finished sub-machine in slot `index` where it lies, returning what
    /// `inspect` saw of it first (`None` if the slot was empty). [`remove`](Self::remove)
    /// moves it out, a copy of a few hundred bytes for a caller that only drops it.
    pub(crate) fn finish<R>(&mut self, index: usize, inspect: impl FnOnce(&T) -> R) -> Option<R> {
        let slot = self.slots.get_mut(index)?;
        let seen = inspect(slot.task.as_ref()?);
        slot.task = None;
        self.free.push(index);
        self.len -= 1;
        Some(seen)
    }

    /// Every running sub-machine, for shutting them all down.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.len = 0;
        self.free.clear();
        self.slots.drain(..).filter_map(|slot| slot.task)
    }
}

impl ReadyList {
    fn lock(&self) -> std::sync::MutexGuard<'_, ReadyState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut state = self.ready.lock();
        state.indices.push(self.index);
        let parent = state.parent.clone();
        drop(state);
        if let Some(parent) = parent {
            parent.wake();
        }
    }
}

impl<T> std::fmt::Debug for TaskSet<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskSet").field("len", &self.len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::TaskSet;

    #[test]
    fn slots_grow_by_a_quarter_not_by_doubling() {
        let mut tasks = TaskSet::new();
        for task in 0..17u32 {
            tasks.push(task);
        }
        // Doubling would hold room for 32.
        assert!(tasks.slots.capacity() <= 20, "{}", tasks.slots.capacity());
        for task in 17..1000u32 {
            tasks.push(task);
        }
        assert_eq!(tasks.len(), 1000);
        assert!(tasks.slots.capacity() <= 1250, "{}", tasks.slots.capacity());
    }

    #[test]
    fn a_finished_slot_is_emptied_and_reused() {
        let mut tasks = TaskSet::new();
        let first = tasks.push(String::from("first"));
        let second = tasks.push(String::from("second"));
        assert_eq!(tasks.finish(first, |task| task.len()), Some(5));
        assert_eq!(tasks.finish(first, |task| task.len()), None);
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks.push(String::from("third")), first);
        assert_eq!(tasks.remove(second).as_deref(), Some("second"));
        assert_eq!(tasks.len(), 1);
    }
}
