//! [`Queue<T>`]: a poll-native FIFO, bounded or unbounded, with close semantics.
//!
//! Any number of handles may push and pop (it is multi-producer, multi-consumer); cloning a
//! handle shares the queue. Closing is explicit ([`Queue::close`]) and affects every handle:
//! pushes fail from then on, pops drain the backlog and then report the end. Dropping handles
//! never closes the queue by itself; a type that wants "closed when the sender goes away"
//! calls `close` from its own `Drop`.
//!
//! Waking: a push wakes every parked popper and a pop wakes every parked pusher. With one
//! consumer (the common case: commands into a session machine) that is exactly one wake.

use std::collections::VecDeque;
use std::fmt;
use std::task::Poll;

use crate::sync::{Arc, Mutex};
use crate::{Closed, Waiter, WaiterList, wait};

/// A FIFO queue handle. See the [module documentation](self).
///
/// ```
/// use moqx_kio::Queue;
///
/// let queue = Queue::bounded(2);
/// queue.try_push("a").unwrap();
/// queue.try_push("b").unwrap();
/// assert!(queue.try_push("c").is_err(), "full");
/// queue.close();
/// assert_eq!(queue.try_pop(), Ok("a"));
/// assert_eq!(queue.try_pop(), Ok("b"));
/// assert_eq!(queue.try_pop(), Err(moqx_kio::queue::TryPopError::Closed));
/// ```
pub struct Queue<T> {
    shared: Arc<Shared<T>>,
}

/// Why [`Queue::try_push`] gave the value back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryPushError<T> {
    /// The queue is bounded and holds `capacity` items.
    Full(T),
    /// The queue is closed.
    Closed(T),
}

/// Why [`Queue::try_pop`] returned no item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryPopError {
    /// Nothing queued right now; the queue is open.
    Empty,
    /// Nothing queued and the queue is closed: nothing will ever arrive.
    Closed,
}

impl<T> Queue<T> {
    /// A queue without a capacity limit.
    pub fn unbounded() -> Self {
        Self::with_capacity_limit(None)
    }

    /// A queue holding at most `capacity` items; pushes wait (or fail with `Full`) beyond it.
    ///
    /// # Panics
    ///
    /// If `capacity` is 0: a queue that can hold nothing can never deliver anything.
    pub fn bounded(capacity: usize) -> Self {
        assert!(
            capacity > 0,
            "moqx_kio::Queue::bounded: capacity must be at least 1"
        );
        Self::with_capacity_limit(Some(capacity))
    }

    fn with_capacity_limit(capacity: Option<usize>) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    items: VecDeque::new(),
                    closed: false,
                }),
                capacity,
                poppers: WaiterList::new(),
                pushers: WaiterList::new(),
            }),
        }
    }

    /// Pushes `value` if there is room and the queue is open.
    pub fn try_push(&self, value: T) -> Result<(), TryPushError<T>> {
        let mut state = self.shared.state.lock();
        if state.closed {
            return Err(TryPushError::Closed(value));
        }
        if self.is_full(&state) {
            return Err(TryPushError::Full(value));
        }
        state.items.push_back(value);
        drop(state);
        self.shared.poppers.wake_all();
        Ok(())
    }

    /// Pushes the value in `slot` when there is room: `Ready(Ok(()))` once pushed (the slot is
    /// then `None`), `Ready(Err(Closed))` if the queue is closed (the value stays in the slot),
    /// `Pending` while full. An empty slot is `Ready(Ok(()))` at once.
    pub fn poll_push(&self, waiter: &Waiter, slot: &mut Option<T>) -> Poll<Result<(), Closed>> {
        if slot.is_none() {
            return Poll::Ready(Ok(()));
        }
        let mut state = self.shared.state.lock();
        if state.closed {
            return Poll::Ready(Err(Closed));
        }
        if self.is_full(&state) {
            // Registered under the lock: a pop after this wakes us.
            self.shared.pushers.register(waiter);
            return Poll::Pending;
        }
        state.items.extend(slot.take());
        drop(state);
        self.shared.poppers.wake_all();
        Poll::Ready(Ok(()))
    }

    /// Pushes `value`, waiting for room. Gives the value back if the queue is closed.
    pub async fn push(&self, value: T) -> Result<(), TryPushError<T>> {
        let mut slot = Some(value);
        match wait(|waiter| self.poll_push(waiter, &mut slot)).await {
            Ok(()) => Ok(()),
            Err(Closed) => match slot {
                Some(value) => Err(TryPushError::Closed(value)),
                None => Ok(()),
            },
        }
    }

    /// Pops the oldest item if there is one.
    pub fn try_pop(&self) -> Result<T, TryPopError> {
        let mut state = self.shared.state.lock();
        match state.items.pop_front() {
            Some(item) => {
                drop(state);
                self.wake_pushers();
                Ok(item)
            }
            None if state.closed => Err(TryPopError::Closed),
            None => Err(TryPopError::Empty),
        }
    }

    /// `Ready(Some(item))` with the oldest item, `Ready(None)` once the queue is closed and
    /// drained, `Pending` while open and empty.
    pub fn poll_pop(&self, waiter: &Waiter) -> Poll<Option<T>> {
        let mut state = self.shared.state.lock();
        match state.items.pop_front() {
            Some(item) => {
                drop(state);
                self.wake_pushers();
                Poll::Ready(Some(item))
            }
            None if state.closed => Poll::Ready(None),
            None => {
                self.shared.poppers.register(waiter);
                Poll::Pending
            }
        }
    }

    /// Pops the oldest item, waiting for one; `None` once closed and drained.
    pub async fn pop(&self) -> Option<T> {
        wait(|waiter| self.poll_pop(waiter)).await
    }

    /// Closes the queue for every handle: pushes fail, pops drain what is queued and then
    /// return `None`. Idempotent.
    pub fn close(&self) {
        let mut state = self.shared.state.lock();
        if state.closed {
            return;
        }
        state.closed = true;
        drop(state);
        self.shared.poppers.wake_all();
        self.shared.pushers.wake_all();
    }

    /// Whether the queue is closed (it may still hold items).
    pub fn is_closed(&self) -> bool {
        self.shared.state.lock().closed
    }

    /// How many items are queued.
    pub fn len(&self) -> usize {
        self.shared.state.lock().items.len()
    }

    /// Whether no item is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The capacity limit, `None` if unbounded.
    pub fn capacity(&self) -> Option<usize> {
        self.shared.capacity
    }

    fn is_full(&self, state: &State<T>) -> bool {
        self.shared
            .capacity
            .is_some_and(|capacity| state.items.len() >= capacity)
    }

    fn wake_pushers(&self) {
        if self.shared.capacity.is_some() {
            self.shared.pushers.wake_all();
        }
    }
}

impl<T> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T> fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.state.lock();
        f.debug_struct("Queue")
            .field("len", &state.items.len())
            .field("capacity", &self.shared.capacity)
            .field("closed", &state.closed)
            .finish()
    }
}

impl<T> fmt::Display for TryPushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) => f.write_str("queue is full"),
            Self::Closed(_) => f.write_str("queue is closed"),
        }
    }
}

impl<T: fmt::Debug> std::error::Error for TryPushError<T> {}

impl fmt::Display for TryPopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("queue is empty"),
            Self::Closed => f.write_str("queue is closed and drained"),
        }
    }
}

impl std::error::Error for TryPopError {}

struct Shared<T> {
    state: Mutex<State<T>>,
    capacity: Option<usize>,
    poppers: WaiterList,
    pushers: WaiterList,
}

struct State<T> {
    items: VecDeque<T>,
    closed: bool,
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::test_util::CountingWaker;

    #[test]
    fn fifo_order_and_close_drains_backlog_first() {
        let queue = Queue::unbounded();
        for i in 0..5 {
            queue.try_push(i).unwrap();
        }
        queue.close();
        assert_eq!(queue.try_push(9), Err(TryPushError::Closed(9)));
        let (waker, _) = CountingWaker::pair();
        let waiter = Waiter::new(&waker);
        let mut popped = Vec::new();
        while let Poll::Ready(Some(item)) = queue.poll_pop(&waiter) {
            popped.push(item);
        }
        assert_eq!(popped, [0, 1, 2, 3, 4]);
        assert_eq!(queue.poll_pop(&waiter), Poll::Ready(None));
    }

    #[test]
    fn push_wakes_a_parked_popper() {
        let queue = Queue::unbounded();
        let (waker, count) = CountingWaker::pair();
        let waiter = Waiter::new(&waker);
        assert_eq!(queue.poll_pop(&waiter), Poll::Pending);
        queue.try_push(1).unwrap();
        assert_eq!(count.count(), 1);
        assert_eq!(queue.poll_pop(&waiter), Poll::Ready(Some(1)));
    }

    #[test]
    fn bounded_push_waits_for_a_pop() {
        let queue = Queue::bounded(1);
        queue.try_push('a').unwrap();
        assert_eq!(queue.try_push('b'), Err(TryPushError::Full('b')));
        let (waker, count) = CountingWaker::pair();
        let waiter = Waiter::new(&waker);
        let mut slot = Some('b');
        assert!(queue.poll_push(&waiter, &mut slot).is_pending());
        assert_eq!(slot, Some('b'));
        assert_eq!(queue.try_pop(), Ok('a'));
        assert_eq!(count.count(), 1);
        assert_eq!(queue.poll_push(&waiter, &mut slot), Poll::Ready(Ok(())));
        assert_eq!(slot, None);
        assert_eq!(queue.len(), 1);
    }

    #[test]
    fn close_wakes_pushers_and_poppers_and_returns_the_value() {
        let full = Queue::bounded(1);
        full.try_push(0).unwrap();
        let (waker, count) = CountingWaker::pair();
        let pusher = Waiter::new(&waker);
        let mut slot = Some(1);
        assert!(full.poll_push(&pusher, &mut slot).is_pending());
        let empty: Queue<i32> = Queue::unbounded();
        let popper = Waiter::new(&waker);
        assert!(empty.poll_pop(&popper).is_pending());
        full.close();
        empty.close();
        assert_eq!(count.count(), 2);
        assert_eq!(full.poll_push(&pusher, &mut slot), Poll::Ready(Err(Closed)));
        assert_eq!(slot, Some(1));
        assert_eq!(
            pollster::block_on(full.push(2)),
            Err(TryPushError::Closed(2))
        );
    }

    #[test]
    fn async_push_and_pop_across_threads_deliver_everything_in_order() {
        let queue = Queue::bounded(4);
        let consumer = queue.clone();
        let handle = std::thread::spawn(move || {
            let mut received = Vec::new();
            while let Some(item) = pollster::block_on(consumer.pop()) {
                received.push(item);
            }
            received
        });
        for i in 0..1000 {
            pollster::block_on(queue.push(i)).unwrap();
        }
        queue.close();
        assert_eq!(handle.join().unwrap(), (0..1000).collect::<Vec<_>>());
    }

    #[test]
    #[should_panic(expected = "capacity must be at least 1")]
    fn zero_capacity_is_refused() {
        let _ = Queue::<()>::bounded(0);
    }
}
