//! A watch-style cell: [`Producer<T>`] mutates a value, [`Consumer<T>`]s wait for it to satisfy
//! a predicate.
//!
//! Use it for control state (a session's status, a broadcast's track table, a subscription's
//! priority): the value sits behind a mutex, so every read takes it. For data that many readers
//! stream through, use [`log`](crate::log), whose reads take no lock.
//!
//! Closing: the cell closes when [`Producer::close`] is called or the last producer is dropped.
//! Consumers still see the final value; predicates are evaluated before the closed check, so a
//! consumer waiting for a state that the producer reached just before closing still gets it.
//!
//! Liveness in the other direction: producers can see how many consumers exist and wait until
//! there are none ([`Producer::poll_unused`]), which is how a relay cancels upstream work that
//! nobody downstream wants any more.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::task::Poll;

use crate::sync::{Arc, AtomicUsize, Mutex, MutexGuard, Ordering};
use crate::{Closed, Waiter, WaiterList, wait};

/// The writing side of a watch cell. Cloning adds a producer; the cell closes when the last
/// one is dropped.
///
/// ```
/// use moqx_kio::Producer;
///
/// let producer = Producer::new(0u32);
/// let consumer = producer.consume();
/// producer.update(|value| *value = 42);
/// assert_eq!(*consumer.borrow(), 42);
///
/// drop(producer);
/// assert!(consumer.is_closed());
/// ```
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
}

/// The reading side of a watch cell. Cloning adds a consumer; producers can observe the count.
///
/// ```
/// # fn main() -> Result<(), moqx_kio::Closed> {
/// use moqx_kio::Producer;
///
/// let producer = Producer::new(Vec::<&str>::new());
/// let consumer = producer.consume();
/// let waiting = std::thread::spawn(move || {
///     pollster::block_on(consumer.until(|names| names.first().copied()))
/// });
/// producer.update(|names| names.push("video"));
/// assert_eq!(waiting.join().unwrap()?, "video");
/// # Ok(())
/// # }
/// ```
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
}

/// Exclusive access to the value, from [`Producer::write`]. Consumers are woken when it drops,
/// after the lock is released.
pub struct Write<'a, T> {
    guard: Option<MutexGuard<'a, State<T>>>,
    shared: &'a Shared<T>,
}

/// Shared access to the value, from [`Consumer::borrow`] or [`Producer::borrow`]. Holds the
/// cell's lock: keep it short.
pub struct Ref<'a, T> {
    guard: MutexGuard<'a, State<T>>,
}

impl<T> Producer<T> {
    /// A new open cell holding `value`, with no consumers yet.
    pub fn new(value: T) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    value,
                    closed: false,
                }),
                producers: AtomicUsize::new(1),
                consumers: AtomicUsize::new(0),
                changed: WaiterList::new(),
                consumers_changed: WaiterList::new(),
            }),
        }
    }

    /// A new consumer of this cell.
    pub fn consume(&self) -> Consumer<T> {
        Consumer::attach(self.shared.clone())
    }

    /// Locks the value for writing. Consumers are woken when the guard drops.
    pub fn write(&self) -> Write<'_, T> {
        Write {
            guard: Some(self.shared.state.lock()),
            shared: &self.shared,
        }
    }

    /// Mutates the value with `f`, then wakes consumers.
    pub fn update<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.write())
    }

    /// Locks the value for reading, without waking anyone.
    pub fn borrow(&self) -> Ref<'_, T> {
        Ref {
            guard: self.shared.state.lock(),
        }
    }

    /// Closes the cell for every producer and consumer. Idempotent.
    pub fn close(&self) {
        self.shared.close();
    }

    /// Whether the cell is closed.
    pub fn is_closed(&self) -> bool {
        self.shared.state.lock().closed
    }

    /// How many consumers exist right now.
    pub fn consumer_count(&self) -> usize {
        self.shared.consumers.load(Ordering::Acquire)
    }

    /// Ready when no consumer exists (including when none ever did).
    pub fn poll_unused(&self, waiter: &Waiter) -> Poll<()> {
        self.poll_consumers(waiter, |count| count == 0)
    }

    /// Ready when at least one consumer exists.
    pub fn poll_used(&self, waiter: &Waiter) -> Poll<()> {
        self.poll_consumers(waiter, |count| count > 0)
    }

    /// Waits until no consumer exists.
    pub async fn unused(&self) {
        wait(|waiter| self.poll_unused(waiter)).await
    }

    /// Waits until at least one consumer exists.
    pub async fn used(&self) {
        wait(|waiter| self.poll_used(waiter)).await
    }

    fn poll_consumers(&self, waiter: &Waiter, ready: impl Fn(usize) -> bool) -> Poll<()> {
        let shared = &self.shared;
        if ready(shared.consumers.load(Ordering::Acquire)) {
            return Poll::Ready(());
        }
        shared.consumers_changed.register(waiter);
        if ready(shared.consumers.load(Ordering::Acquire)) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl<T> Clone for Producer<T> {
    fn clone(&self) -> Self {
        self.shared.producers.fetch_add(1, Ordering::Relaxed);
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        if self.shared.producers.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.close();
        }
    }
}

impl<T: Default> Default for Producer<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T: fmt::Debug> fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt("Producer", f)
    }
}

impl<T> Consumer<T> {
    fn attach(shared: Arc<Shared<T>>) -> Self {
        shared.consumers.fetch_add(1, Ordering::AcqRel);
        shared.consumers_changed.wake_all();
        Self { shared }
    }

    /// Locks the value for reading.
    pub fn borrow(&self) -> Ref<'_, T> {
        Ref {
            guard: self.shared.state.lock(),
        }
    }

    /// Whether the cell is closed.
    pub fn is_closed(&self) -> bool {
        self.shared.state.lock().closed
    }

    /// Ready with `Ok(r)` as soon as `f` maps the value to `Some(r)`, or with `Err(Closed)` if
    /// the cell is closed and `f` still returns `None`.
    ///
    /// `f` runs under the cell's lock: it must not call back into the same cell.
    pub fn poll_until<R>(
        &self,
        waiter: &Waiter,
        mut f: impl FnMut(&T) -> Option<R>,
    ) -> Poll<Result<R, Closed>> {
        let state = self.shared.state.lock();
        if let Some(result) = f(&state.value) {
            return Poll::Ready(Ok(result));
        }
        if state.closed {
            return Poll::Ready(Err(Closed));
        }
        // Registered under the state lock: a producer's change after this point wakes us, and
        // a change before it was visible to `f` above.
        self.shared.changed.register(waiter);
        Poll::Pending
    }

    /// Waits until `f` maps the value to `Some(r)`; `Err(Closed)` if the cell closes first.
    pub async fn until<R>(&self, mut f: impl FnMut(&T) -> Option<R>) -> Result<R, Closed> {
        wait(|waiter| self.poll_until(waiter, &mut f)).await
    }

    /// Ready when the cell is closed.
    pub fn poll_closed(&self, waiter: &Waiter) -> Poll<()> {
        self.poll_until(waiter, |_| None::<()>).map(|_| ())
    }

    /// Waits until the cell is closed.
    pub async fn closed(&self) {
        wait(|waiter| self.poll_closed(waiter)).await
    }
}

impl<T> Clone for Consumer<T> {
    fn clone(&self) -> Self {
        Self::attach(self.shared.clone())
    }
}

impl<T> Drop for Consumer<T> {
    fn drop(&mut self) {
        self.shared.consumers.fetch_sub(1, Ordering::AcqRel);
        self.shared.consumers_changed.wake_all();
    }
}

impl<T: fmt::Debug> fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt("Consumer", f)
    }
}

impl<T> Deref for Write<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // The guard is only taken out in `drop`.
        &self.guard.as_ref().expect("guard present until drop").value
    }
}

impl<T> DerefMut for Write<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard.as_mut().expect("guard present until drop").value
    }
}

impl<T> Drop for Write<'_, T> {
    fn drop(&mut self) {
        // Release the lock before waking, so woken consumers do not block on it.
        drop(self.guard.take());
        self.shared.changed.wake_all();
    }
}

impl<T: fmt::Debug> fmt::Debug for Write<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T> Deref for Ref<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.guard.value
    }
}

impl<T: fmt::Debug> fmt::Debug for Ref<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

struct Shared<T> {
    state: Mutex<State<T>>,
    producers: AtomicUsize,
    consumers: AtomicUsize,
    /// Consumers waiting for the value or the closed flag.
    changed: WaiterList,
    /// Producers waiting for the consumer count.
    consumers_changed: WaiterList,
}

struct State<T> {
    value: T,
    closed: bool,
}

impl<T> Shared<T> {
    fn close(&self) {
        let mut state = self.state.lock();
        if state.closed {
            return;
        }
        state.closed = true;
        drop(state);
        self.changed.wake_all();
    }
}

impl<T: fmt::Debug> Shared<T> {
    fn fmt(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct(name)
            .field("value", &state.value)
            .field("closed", &state.closed)
            .field("consumers", &self.consumers.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::test_util::CountingWaker;

    #[test]
    fn consumer_is_woken_by_a_write_and_sees_it() {
        let producer = Producer::new(0);
        let consumer = producer.consume();
        let (waker, count) = CountingWaker::pair();
        let waiter = Waiter::new(&waker);
        let ready = |v: &i32| (*v > 0).then_some(*v);
        assert!(consumer.poll_until(&waiter, ready).is_pending());
        producer.update(|v| *v = 5);
        assert_eq!(count.count(), 1);
        assert_eq!(consumer.poll_until(&waiter, ready), Poll::Ready(Ok(5)));
    }

    #[test]
    fn last_producer_drop_closes_but_a_clone_does_not() {
        let producer = Producer::new(());
        let other = producer.clone();
        let consumer = producer.consume();
        drop(producer);
        assert!(!consumer.is_closed());
        drop(other);
        assert!(consumer.is_closed());
    }

    #[test]
    fn closing_wakes_consumers_and_the_final_value_is_still_seen() {
        let producer = Producer::new(1);
        let consumer = producer.consume();
        let (waker, count) = CountingWaker::pair();
        let waiter = Waiter::new(&waker);
        assert!(
            consumer
                .poll_until(&waiter, |v| (*v == 2).then_some(()))
                .is_pending()
        );
        producer.update(|v| *v = 2);
        producer.close();
        assert!(count.count() >= 1);
        assert_eq!(
            consumer.poll_until(&waiter, |v| (*v == 2).then_some(())),
            Poll::Ready(Ok(()))
        );
        assert_eq!(
            consumer.poll_until(&waiter, |v| (*v == 3).then_some(())),
            Poll::Ready(Err(Closed))
        );
    }

    #[test]
    fn producer_observes_consumers_coming_and_going() {
        let producer = Producer::new(());
        let (waker, count) = CountingWaker::pair();
        let waiter = Waiter::new(&waker);
        assert!(producer.poll_unused(&waiter).is_ready(), "no consumer yet");
        assert!(producer.poll_used(&waiter).is_pending());
        let first = producer.consume();
        assert_eq!(count.count(), 1);
        let second = first.clone();
        assert_eq!(producer.consumer_count(), 2);
        assert!(producer.poll_unused(&waiter).is_pending());
        drop(first);
        assert!(producer.poll_unused(&waiter).is_pending());
        drop(second);
        assert!(count.count() >= 2);
        assert!(producer.poll_unused(&waiter).is_ready());
    }

    #[test]
    fn async_wrappers_complete_across_threads() {
        let producer = Producer::new(0u64);
        let consumer = producer.consume();
        let handle = std::thread::spawn(move || {
            pollster::block_on(consumer.until(|v| (*v >= 3).then_some(*v)))
        });
        for i in 1..=3 {
            producer.update(|v| *v = i);
        }
        assert_eq!(handle.join().unwrap(), Ok(3));
        pollster::block_on(producer.unused());
    }

    #[test]
    fn write_guard_wakes_only_after_releasing_the_lock() {
        // A waker that reads the cell while being woken would deadlock if the lock were held.
        use std::sync::Arc as StdArc;
        use std::task::{Wake, Waker};
        struct Peek(Consumer<u8>, std::sync::Mutex<Option<u8>>);
        impl Wake for Peek {
            fn wake(self: StdArc<Self>) {
                *self.1.lock().unwrap() = Some(*self.0.borrow());
            }
        }
        let producer = Producer::new(0u8);
        let peek = StdArc::new(Peek(producer.consume(), std::sync::Mutex::new(None)));
        let waiter = Waiter::new(&Waker::from(peek.clone()));
        assert!(
            peek.0
                .poll_until(&waiter, |v| (*v == 9).then_some(()))
                .is_pending()
        );
        *producer.write() = 9;
        assert_eq!(*peek.1.lock().unwrap(), Some(9));
    }
}
