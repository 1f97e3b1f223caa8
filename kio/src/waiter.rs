//! [`Waiter`] and [`WaiterList`]: how a parked task is found again.
//!
//! A `Waiter` belongs to one logical task (or one sub-task of a state machine) and carries its
//! current [`Waker`]. A `WaiterList` belongs to a piece of shared state; a `poll_*` method that
//! finds nothing to do registers the caller's waiter in the list and returns `Pending`, and
//! whoever changes the state calls [`WaiterList::wake_all`] afterwards.
//!
//! # How it works
//!
//! Each waiter has a *generation* counter. A list entry is `(waiter, generation at
//! registration)`, and it is live only while the waiter's generation is unchanged. Waking an
//! entry is a compare-and-swap from that generation to the next one, so:
//!
//! - a waiter registered in several lists is woken once, by whichever list fires first, and its
//!   entries in the other lists become stale at that moment;
//! - dropping a waiter bumps its generation, which deregisters it from every list at once,
//!   without touching the lists (stale entries are pruned when a list would otherwise grow);
//! - registering twice in the same list within one generation is a no-op: the waiter
//!   remembers which lists hold a live entry for its current generation.
//!
//! Wakers are always invoked after the list's lock is released.
//!
//! # The call order every primitive follows
//!
//! 1. check the state; if ready, return `Ready`;
//! 2. otherwise [`WaiterList::register`] the waiter;
//! 3. check the state again; if it became ready, return `Ready` (the registration is then a
//!    harmless spurious wakeup later), else return `Pending`.
//!
//! The mutating side stores its change first and calls [`WaiterList::wake_all`] second. Both
//! sides put a sequentially consistent fence between their store and their load, so one of
//! them always sees the other: no wakeup is lost, even when the list's fast path skips the
//! lock because it looked empty.

use std::fmt;
use std::task::Waker;

use crate::sync::{Arc, AtomicU64, AtomicUsize, Mutex, Ordering};

/// The registration handle of one task: its current [`Waker`] plus the bookkeeping that makes
/// registration idempotent.
///
/// Create one per task (or per sub-task a state machine wants to wake separately), refresh its
/// waker with [`Waiter::set_waker`] at the start of each poll, and pass `&Waiter` to `poll_*`
/// methods. [`wait`](crate::wait) does all of this for an `async` caller.
///
/// Dropping a `Waiter` deregisters it from every list it is in.
///
/// ```
/// use std::task::{Poll, Waker};
/// use moqx_kio::{Waiter, WaiterList};
///
/// let list = WaiterList::new();
/// let waiter = Waiter::new(Waker::noop());
/// list.register(&waiter);
/// list.register(&waiter); // idempotent: still one live entry
/// assert_eq!(list.live_len(), 1);
/// drop(waiter); // deregisters
/// assert_eq!(list.live_len(), 0);
/// ```
pub struct Waiter {
    slot: Arc<Slot>,
}

/// A set of parked [`Waiter`]s, owned by the shared state they wait on.
///
/// See the [module documentation](self) for the protocol.
pub struct WaiterList {
    /// Number of entries (live or stale) in `state.entries`; lets `wake_all` skip the lock
    /// when nobody is registered, which is the common case for a publisher.
    registered: AtomicUsize,
    /// The identity of this list in waiters' memos: the address of `state.token`, or 0 before
    /// the first registration.
    token: AtomicUsize,
    state: Mutex<ListState>,
}

impl Waiter {
    /// A waiter that will wake `waker`.
    pub fn new(waker: &Waker) -> Self {
        Self {
            slot: Arc::new(Slot {
                generation: AtomicU64::new(0),
                state: Mutex::new(SlotState {
                    waker: Some(waker.clone()),
                    memo_generation: 0,
                    memo: Vec::new(),
                }),
            }),
        }
    }

    /// Replaces the waker if `waker` would not wake the same task. Call it at the start of
    /// every poll; it is cheap when the waker is unchanged.
    pub fn set_waker(&self, waker: &Waker) {
        let mut state = self.slot.state.lock();
        if state
            .waker
            .as_ref()
            .is_some_and(|current| current.will_wake(waker))
        {
            return;
        }
        let old = state.waker.replace(waker.clone());
        // Dropping a waker runs executor code, which may drop a cell that wakes this very
        // waiter: never do it under the waiter's own lock.
        drop(state);
        drop(old);
    }

    /// The task waker this waiter currently holds, for polling a foreign future (a runtime's
    /// timer, say) on the waiter's behalf. That future wakes the task directly, not through
    /// a list, which is all a foreign future needs.
    pub fn waker(&self) -> Option<Waker> {
        self.slot.state.lock().waker.clone()
    }

    /// How many times this waiter has been woken (or invalidated). Two equal readings mean no
    /// list woke this waiter in between.
    pub fn generation(&self) -> u64 {
        self.slot.generation.load(Ordering::Acquire)
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        // Invalidate every entry in every list at once, then let go of the waker so that a
        // list that is never woken again does not keep the task alive.
        self.slot.generation.fetch_add(1, Ordering::AcqRel);
        let waker = self.slot.state.lock().waker.take();
        drop(waker); // outside the lock, as in `set_waker`
    }
}

impl fmt::Debug for Waiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Waiter")
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

impl WaiterList {
    /// An empty list. Allocates nothing until the first registration.
    pub fn new() -> Self {
        Self {
            registered: AtomicUsize::new(0),
            token: AtomicUsize::new(0),
            state: Mutex::new(ListState {
                entries: Vec::new(),
                spare: Vec::new(),
                token: None,
            }),
        }
    }

    /// Registers `waiter` to be woken by the next [`wake_all`](Self::wake_all).
    ///
    /// Idempotent: registering again before being woken does nothing. After registering,
    /// re-check the state you are waiting on (see the [module documentation](self)).
    pub fn register(&self, waiter: &Waiter) {
        let slot = &waiter.slot;
        let mut slot_state = slot.state.lock();
        let generation = slot.generation.load(Ordering::Acquire);
        if slot_state.memo_generation != generation {
            slot_state.memo.clear();
            slot_state.memo_generation = generation;
        }
        let token = self.token.load(Ordering::Acquire);
        if token != 0 && slot_state.memo.contains(&token) {
            // Already registered for this generation. The fence still orders the caller's
            // re-check after everything this waiter did before.
            crate::sync::fence(Ordering::SeqCst);
            return;
        }

        let mut state = self.state.lock();
        let token = state.token_address(&self.token);
        if state.entries.len() == state.entries.capacity() {
            // About to grow: drop stale entries first, so a list that is rarely woken does
            // not accumulate the registrations of waiters that moved on.
            state.entries.retain(Entry::is_live);
        }
        state.entries.push(Entry {
            slot: slot.clone(),
            generation,
        });
        // Relaxed is enough: the SeqCst fence below orders this store before the caller's
        // re-check, against the fence in `wake_all` (C++20 fence-fence synchronization). A
        // SeqCst store here would be a second full barrier per registration.
        self.registered
            .store(state.entries.len(), Ordering::Relaxed);
        drop(state);
        slot_state.memo.push(token);
        drop(slot_state);
        // Pairs with the fence in `wake_all`: our registration is visible to the waker, or the
        // waker's state change is visible to our re-check.
        crate::sync::fence(Ordering::SeqCst);
    }

    /// Wakes every registered waiter and empties the list. Wakers run after the list's lock is
    /// released. Cheap when the list is empty.
    pub fn wake_all(&self) {
        crate::sync::fence(Ordering::SeqCst);
        if self.registered.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut state = self.state.lock();
        if state.entries.is_empty() {
            return;
        }
        let mut entries = std::mem::take(&mut state.spare);
        std::mem::swap(&mut entries, &mut state.entries);
        self.registered.store(0, Ordering::Relaxed);
        drop(state);

        // If a waker panics, `WakeRest` wakes the remaining entries while unwinding, so no
        // waiter is left registered-but-never-woken.
        let mut rest = WakeRest(entries.drain(..));
        for entry in rest.0.by_ref() {
            entry.wake();
        }
        drop(rest);

        // Give the allocation back so the next round of registrations does not reallocate.
        let mut state = self.state.lock();
        if state.spare.capacity() < entries.capacity() {
            state.spare = entries;
        }
    }

    /// The number of entries whose waiter has not been woken or dropped since registering.
    /// For tests and diagnostics; takes the lock.
    pub fn live_len(&self) -> usize {
        let state = self.state.lock();
        state.entries.iter().filter(|entry| entry.is_live()).count()
    }
}

impl Default for WaiterList {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for WaiterList {
    fn drop(&mut self) {
        // Waiters remember this list by its token; waking them bumps their generation, which
        // forgets the token before its address can be reused by another list.
        self.wake_all();
    }
}

impl fmt::Debug for WaiterList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaiterList")
            .field("registered", &self.registered.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// One parked [`Waiter`], for state that has at most one waiter at a time and already sits
/// behind its owner's lock: a QUIC stream's reader, say. It is a [`WaiterList`] of
/// capacity one without a lock, an allocation or a memo of its own, so registering costs a
/// reference-count increment.
///
/// The owner's lock orders registration against the state change (check, register and
/// re-check all happen under it), so the slot needs no fence. Waking follows the list's
/// rule: [`take`](Self::take) claims the wake under the owner's lock and hands back the
/// [`Waker`] to call *after* the lock is released.
///
/// ```
/// use moqx_kio::{Waiter, WaiterSlot};
///
/// let mut slot = WaiterSlot::new();
/// let waiter = Waiter::new(std::task::Waker::noop());
/// slot.register(&waiter);
/// assert!(slot.is_registered());
/// let waker = slot.take().expect("registered and not yet woken");
/// waker.wake(); // after the owner's lock is released
/// assert!(slot.take().is_none(), "a wake empties the slot");
/// ```
#[derive(Default)]
pub struct WaiterSlot {
    entry: Option<Entry>,
}

impl WaiterSlot {
    /// An empty slot.
    pub const fn new() -> Self {
        Self { entry: None }
    }

    /// Parks `waiter` here, replacing whatever waiter was parked before (it is not woken:
    /// one slot, one waiter). Registering the same waiter again is a no-op.
    pub fn register(&mut self, waiter: &Waiter) {
        let generation = waiter.slot.generation.load(Ordering::Acquire);
        if let Some(entry) = &self.entry
            && entry.generation == generation
            && Arc::ptr_eq(&entry.slot, &waiter.slot)
        {
            return;
        }
        self.entry = Some(Entry {
            slot: waiter.slot.clone(),
            generation,
        });
    }

    /// Whether a waiter is parked here and was not woken (by this slot or any list) or
    /// dropped since.
    pub fn is_registered(&self) -> bool {
        self.entry.as_ref().is_some_and(Entry::is_live)
    }

    /// Empties the slot and claims the parked waiter's wake: the waker to call once the
    /// owner's lock is released, or `None` if nothing is parked (or the waiter was woken
    /// elsewhere or dropped since it parked).
    #[must_use = "the waker must be called to deliver the wake"]
    pub fn take(&mut self) -> Option<Waker> {
        let entry = self.entry.take()?;
        entry.slot.claim(entry.generation)
    }
}

impl fmt::Debug for WaiterSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaiterSlot")
            .field("registered", &self.is_registered())
            .finish()
    }
}

/// The part of a waiter that lists point at.
struct Slot {
    /// Bumped by every wake and by the waiter's drop; an entry is live while it matches.
    generation: AtomicU64,
    state: Mutex<SlotState>,
}

struct SlotState {
    waker: Option<Waker>,
    /// The generation `memo` describes.
    memo_generation: u64,
    /// Tokens of the lists that hold a live entry for `memo_generation`.
    memo: Vec<usize>,
}

impl Slot {
    /// Claims the wake for `generation`: bumps the generation and returns the waker to run,
    /// or `None` if the waiter was already woken or dropped since registering.
    fn claim(&self, generation: u64) -> Option<Waker> {
        let won = self
            .generation
            .compare_exchange(
                generation,
                generation.wrapping_add(1),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok();
        if !won {
            return None;
        }
        // Clone rather than take: a state machine may keep re-registering the same waiter
        // without refreshing its waker.
        self.state.lock().waker.clone()
    }
}

/// Wakes whatever is left if a waker panics midway through `wake_all`.
struct WakeRest<'a>(std::vec::Drain<'a, Entry>);

impl Drop for WakeRest<'_> {
    fn drop(&mut self) {
        for entry in self.0.by_ref() {
            entry.wake();
        }
    }
}

struct ListState {
    entries: Vec<Entry>,
    /// An empty vector with capacity, swapped in by `wake_all`.
    spare: Vec<Entry>,
    /// A heap cell whose address identifies this list while it is alive. Allocated on first
    /// registration so that lists nobody waits on cost nothing.
    token: Option<Box<u8>>,
}

impl ListState {
    fn token_address(&mut self, published: &AtomicUsize) -> usize {
        let token = self.token.get_or_insert_with(|| Box::new(0));
        let address = &**token as *const u8 as usize;
        published.store(address, Ordering::Release);
        address
    }
}

struct Entry {
    slot: Arc<Slot>,
    generation: u64,
}

impl Entry {
    fn is_live(&self) -> bool {
        self.slot.generation.load(Ordering::Acquire) == self.generation
    }

    fn wake(self) {
        if let Some(waker) = self.slot.claim(self.generation) {
            waker.wake();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::test_util::CountingWaker;

    #[test]
    fn the_waiter_hands_out_its_current_waker() {
        let (first, first_count) = CountingWaker::pair();
        let (second, second_count) = CountingWaker::pair();
        let waiter = Waiter::new(&first);
        waiter.waker().expect("set").wake();
        assert_eq!(first_count.count(), 1);
        waiter.set_waker(&second);
        waiter.waker().expect("set").wake();
        assert_eq!((first_count.count(), second_count.count()), (1, 1));
    }

    #[test]
    fn wake_all_wakes_each_registered_waiter_once() {
        let list = WaiterList::new();
        let (a_waker, a) = CountingWaker::pair();
        let (b_waker, b) = CountingWaker::pair();
        let wa = Waiter::new(&a_waker);
        let wb = Waiter::new(&b_waker);
        list.register(&wa);
        list.register(&wb);
        list.wake_all();
        assert_eq!((a.count(), b.count()), (1, 1));
        list.wake_all();
        assert_eq!((a.count(), b.count()), (1, 1), "a wake drains the list");
    }

    #[test]
    fn registering_twice_in_one_generation_adds_one_entry() {
        let list = WaiterList::new();
        let (waker, count) = CountingWaker::pair();
        let waiter = Waiter::new(&waker);
        for _ in 0..10 {
            list.register(&waiter);
        }
        assert_eq!(list.state.lock().entries.len(), 1);
        list.wake_all();
        assert_eq!(count.count(), 1);
    }

    #[test]
    fn waiter_is_reusable_after_a_wake() {
        let list = WaiterList::new();
        let (waker, count) = CountingWaker::pair();
        let waiter = Waiter::new(&waker);
        for round in 1..=3 {
            list.register(&waiter);
            list.wake_all();
            assert_eq!(count.count(), round);
        }
        assert_eq!(waiter.generation(), 3);
    }

    #[test]
    fn a_wake_through_one_list_makes_other_entries_stale() {
        let first = WaiterList::new();
        let second = WaiterList::new();
        let (waker, count) = CountingWaker::pair();
        let waiter = Waiter::new(&waker);
        first.register(&waiter);
        second.register(&waiter);
        first.wake_all();
        assert_eq!(second.live_len(), 0);
        second.wake_all();
        assert_eq!(count.count(), 1, "woken once per generation");
    }

    #[test]
    fn dropping_a_waiter_deregisters_it_and_releases_its_waker() {
        let list = WaiterList::new();
        let (waker, count) = CountingWaker::pair();
        let waiter = Waiter::new(&waker);
        list.register(&waiter);
        drop(waker);
        drop(waiter);
        assert_eq!(list.live_len(), 0);
        assert_eq!(
            count.handles(),
            1,
            "only the test's own handle keeps the waker alive"
        );
        list.wake_all();
        assert_eq!(count.count(), 0);
    }

    #[test]
    fn stale_entries_are_pruned_instead_of_growing_the_list() {
        let idle = WaiterList::new();
        let busy = WaiterList::new();
        let (waker, _count) = CountingWaker::pair();
        let waiter = Waiter::new(&waker);
        // A task that polls an idle cell and a busy one, woken by the busy one every time.
        for _ in 0..10_000 {
            idle.register(&waiter);
            busy.register(&waiter);
            busy.wake_all();
        }
        // The vector never grows past its first allocation: each time it fills, the stale
        // entries are pruned instead.
        assert!(idle.state.lock().entries.capacity() <= 4);
        assert_eq!(idle.live_len(), 0);
    }

    #[test]
    fn set_waker_redirects_a_registered_waiter() {
        let list = WaiterList::new();
        let (first, first_count) = CountingWaker::pair();
        let (second, second_count) = CountingWaker::pair();
        let waiter = Waiter::new(&first);
        list.register(&waiter);
        waiter.set_waker(&second);
        list.wake_all();
        assert_eq!((first_count.count(), second_count.count()), (0, 1));
    }

    #[test]
    fn a_panicking_waker_does_not_stop_the_others_from_being_woken() {
        use std::sync::Arc as StdArc;
        use std::task::Wake;
        struct Panics;
        impl Wake for Panics {
            fn wake(self: StdArc<Self>) {
                panic!("waker panics");
            }
        }
        let list = WaiterList::new();
        let panicking = Waiter::new(&Waker::from(StdArc::new(Panics)));
        let (waker, count) = CountingWaker::pair();
        let fine = Waiter::new(&waker);
        list.register(&panicking);
        list.register(&fine);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| list.wake_all()));
        assert!(result.is_err());
        assert_eq!(count.count(), 1, "the other waiter was still woken");
        // And both can register again: no stale memo keeps them out.
        list.register(&fine);
        assert_eq!(list.live_len(), 1);
    }

    #[test]
    fn a_slot_wakes_its_waiter_once_and_empties() {
        let mut slot = WaiterSlot::new();
        let (waker, count) = CountingWaker::pair();
        let waiter = Waiter::new(&waker);
        slot.register(&waiter);
        slot.register(&waiter); // idempotent
        assert!(slot.is_registered());
        slot.take().expect("parked").wake();
        assert_eq!(count.count(), 1);
        assert!(slot.take().is_none(), "empty after a wake");
        assert!(!slot.is_registered());
    }

    #[test]
    fn a_slot_and_a_list_wake_a_shared_waiter_once() {
        let mut slot = WaiterSlot::new();
        let list = WaiterList::new();
        let (waker, count) = CountingWaker::pair();
        let waiter = Waiter::new(&waker);
        slot.register(&waiter);
        list.register(&waiter);
        list.wake_all();
        assert!(
            !slot.is_registered(),
            "the list's wake made the slot's entry stale"
        );
        assert!(slot.take().is_none());
        assert_eq!(count.count(), 1);
        // Registered again after the wake: the slot works for the new generation.
        slot.register(&waiter);
        slot.take().expect("parked again").wake();
        assert_eq!(count.count(), 2);
    }

    #[test]
    fn a_slot_forgets_a_dropped_waiter_and_a_replaced_one() {
        let mut slot = WaiterSlot::new();
        let (first_waker, first) = CountingWaker::pair();
        let (second_waker, second) = CountingWaker::pair();
        let dropped = Waiter::new(&first_waker);
        slot.register(&dropped);
        drop(dropped);
        assert!(!slot.is_registered());
        assert!(slot.take().is_none());

        let replaced = Waiter::new(&first_waker);
        let current = Waiter::new(&second_waker);
        slot.register(&replaced);
        slot.register(&current);
        slot.take().expect("the current waiter").wake();
        assert_eq!((first.count(), second.count()), (0, 1));
        drop(replaced);
    }

    #[test]
    fn dropping_a_list_wakes_its_waiters() {
        let (waker, count) = CountingWaker::pair();
        let waiter = Waiter::new(&waker);
        let list = WaiterList::new();
        list.register(&waiter);
        drop(list);
        assert_eq!(count.count(), 1);
    }

    #[test]
    fn a_new_list_at_a_reused_address_is_not_mistaken_for_an_old_one() {
        // Regression guard for the memo: lists are identified by a token that outlives
        // every live entry, and dropping a list bumps its waiters' generations.
        let (waker, count) = CountingWaker::pair();
        let waiter = Waiter::new(&waker);
        for _ in 0..100 {
            let list = WaiterList::new();
            list.register(&waiter);
            drop(list);
            let list = WaiterList::new();
            list.register(&waiter);
            let before = count.count();
            list.wake_all();
            assert_eq!(count.count(), before + 1);
        }
    }
}
