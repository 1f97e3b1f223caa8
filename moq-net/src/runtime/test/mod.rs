//! A deterministic runtime for tests: a virtual clock, a single-threaded executor, and an
//! in-memory transport with seeded faults ([`LinkConfig`]).
//!
//! Nothing here reads a clock or uses a thread: virtual time starts at an instant the test
//! hands in (it reads the clock once, as a driver would) and moves only when the test moves it ([`TestRuntime::advance`], [`TestRuntime::advance_to_next_deadline`],
//! or [`TestRuntime::run_until`], which jumps from deadline to deadline), and tasks run in a
//! fixed order. The same seed gives the same run, byte for byte; [`seeded`] names the seed
//! in a failing test's panic message so that it can be replayed with `MOQ_TEST_SEED`.
//!
//! ```
//! use std::time::Duration;
//! use moqx_net::runtime::test::TestRuntime;
//! use moqx_net::runtime::{Deadline, Runtime};
//!
//! let runtime = TestRuntime::new(7, std::time::Instant::now());
//! let start = runtime.now();
//! let fired = std::rc::Rc::new(std::cell::Cell::new(false));
//! let mut deadline = runtime.deadline();
//! deadline.set(Some(start + Duration::from_secs(30)));
//! let flag = fired.clone();
//! runtime.spawn_task(async move {
//!     moqx_kio::wait(|waiter| deadline.poll(waiter)).await;
//!     flag.set(true);
//! });
//! runtime.run_until_stalled();
//! assert!(!fired.get(), "virtual time has not moved");
//! runtime.advance_to_next_deadline();
//! assert!(fired.get());
//! assert_eq!(runtime.now() - start, Duration::from_secs(30), "no real time passed");
//! ```

mod executor;
mod link;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use moqx_kio::{Waiter, WaiterList};

pub use link::{LinkConfig, TestRecvStream, TestSendStream, TestTransport};

use super::{Deadline, Instant, Runtime};
use crate::session::SessionMachine;
use executor::Executor;

/// The deterministic runtime. Cloning gives another handle to the same clock and executor.
#[derive(Clone)]
pub struct TestRuntime {
    inner: Rc<Inner>,
}

struct Inner {
    seed: u64,
    /// The real instant virtual time counts from; read once, at creation.
    epoch: Instant,
    /// Virtual time since `epoch`.
    elapsed: Cell<Duration>,
    /// Everything scheduled in virtual time, in order: deadlines and link deliveries.
    timers: RefCell<BTreeMap<(Duration, u64), Callback>>,
    next_timer: Cell<u64>,
    executor: Executor,
}

/// Something to run at a virtual time.
type Callback = Box<dyn FnOnce()>;

/// A scheduled callback, cancellable by key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct TimerKey(Duration, u64);

impl TestRuntime {
    /// A runtime whose randomness (fault injection) comes from `seed` and whose virtual
    /// time starts at `epoch`: any instant the caller picks (a test reads the clock once,
    /// as a driver would). The core never reads a clock itself.
    pub fn new(seed: u64, epoch: Instant) -> Self {
        Self {
            inner: Rc::new(Inner {
                seed,
                epoch,
                elapsed: Cell::new(Duration::ZERO),
                timers: RefCell::new(BTreeMap::new()),
                next_timer: Cell::new(0),
                executor: Executor::default(),
            }),
        }
    }

    /// The seed this runtime was made with.
    pub fn seed(&self) -> u64 {
        self.inner.seed
    }

    /// Virtual time since the runtime was made.
    pub fn elapsed(&self) -> Duration {
        self.inner.elapsed.get()
    }

    /// How many timers are scheduled (deadlines and deliveries in flight). Zero after the
    /// tasks ran means the system is quiet: nothing will happen until something new is
    /// started.
    pub fn pending_timers(&self) -> usize {
        self.inner.timers.borrow().len()
    }

    /// Runs `future` as a task of this runtime.
    pub fn spawn_task(&self, future: impl Future<Output = ()> + 'static) {
        self.inner.executor.spawn(Box::pin(future));
    }

    /// Waits `duration` of virtual time: for a task of this runtime (a test's own client,
    /// a scripted fault) that must wait as a real program would sleep.
    pub fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + 'static {
        let mut deadline = self.deadline();
        deadline.set(Some(self.now() + duration));
        moqx_kio::wait(move |waiter| deadline.poll(waiter))
    }

    /// Polls every task that is ready until none is, without moving the clock.
    pub fn run_until_stalled(&self) {
        self.inner.executor.run_until_stalled();
    }

    /// Moves the clock forward by `duration`, firing every timer on the way in order and
    /// running the tasks they wake.
    pub fn advance(&self, duration: Duration) {
        let target = self.elapsed() + duration;
        self.run_until_stalled();
        while self.fire_next_timer(target) {
            self.run_until_stalled();
        }
        self.inner.elapsed.set(target);
        self.run_until_stalled();
    }

    /// Moves the clock to the earliest timer and fires everything due then. Returns whether
    /// there was a timer.
    pub fn advance_to_next_deadline(&self) -> bool {
        self.run_until_stalled();
        let Some(&(at, _)) = self.inner.timers.borrow().keys().next() else {
            return false;
        };
        while self.fire_next_timer(at) {
            self.run_until_stalled();
        }
        true
    }

    /// Runs, jumping from timer to timer, until `done` returns true; gives up (and returns
    /// false) once virtual time passes `limit` or nothing is left to run.
    pub fn run_until(&self, limit: Duration, mut done: impl FnMut() -> bool) -> bool {
        let deadline = self.elapsed() + limit;
        loop {
            self.run_until_stalled();
            if done() {
                return true;
            }
            let next = self.inner.timers.borrow().keys().next().map(|&(at, _)| at);
            match next {
                Some(at) if at <= deadline => {
                    self.advance_to_next_deadline();
                }
                _ => return false,
            }
        }
    }

    /// Runs `future` to completion in virtual time (up to `limit`), with every other task.
    ///
    /// # Panics
    ///
    /// If the future does not complete within `limit` of virtual time, naming the seed.
    pub fn block_on<T: 'static>(
        &self,
        limit: Duration,
        future: impl Future<Output = T> + 'static,
    ) -> T {
        let output = Rc::new(RefCell::new(None));
        let slot = output.clone();
        self.spawn_task(async move {
            let value = future.await;
            *slot.borrow_mut() = Some(value);
        });
        let finished = self.run_until(limit, || output.borrow().is_some());
        assert!(
            finished,
            "block_on: not done after {limit:?} of virtual time (seed {})",
            self.seed()
        );
        let value = output.borrow_mut().take();
        value.expect("the output was just set")
    }

    /// Schedules `callback` at `elapsed` (virtual time since start).
    pub(crate) fn schedule(
        &self,
        elapsed: Duration,
        callback: impl FnOnce() + 'static,
    ) -> TimerKey {
        let id = self.inner.next_timer.get();
        self.inner.next_timer.set(id + 1);
        let at = elapsed.max(self.elapsed());
        self.inner
            .timers
            .borrow_mut()
            .insert((at, id), Box::new(callback));
        TimerKey(at, id)
    }

    /// Cancels a scheduled callback, if it has not fired.
    pub(crate) fn cancel(&self, key: TimerKey) {
        let removed = self.inner.timers.borrow_mut().remove(&(key.0, key.1));
        drop(removed);
    }

    /// Fires the earliest timer due at or before `limit`, moving the clock to it.
    fn fire_next_timer(&self, limit: Duration) -> bool {
        let mut timers = self.inner.timers.borrow_mut();
        let Some(entry) = timers.first_entry() else {
            return false;
        };
        let (at, _) = *entry.key();
        if at > limit {
            return false;
        }
        let callback = entry.remove();
        drop(timers);
        self.inner.elapsed.set(at.max(self.elapsed()));
        callback();
        true
    }

    fn instant(&self, elapsed: Duration) -> Instant {
        self.inner.epoch + elapsed
    }
}

impl Runtime for TestRuntime {
    type Transport = TestTransport;
    type Deadline = TestDeadline;

    fn now(&self) -> Instant {
        self.instant(self.elapsed())
    }

    fn deadline(&self) -> TestDeadline {
        TestDeadline {
            runtime: self.clone(),
            at: None,
            timer: None,
            waiters: Rc::new(WaiterList::new()),
        }
    }

    fn spawn(&self, machine: SessionMachine<Self>) {
        self.spawn_task(machine);
    }
}

impl std::fmt::Debug for TestRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestRuntime")
            .field("seed", &self.seed())
            .field("elapsed", &self.elapsed())
            .field("timers", &self.inner.timers.borrow().len())
            .finish()
    }
}

/// A [`Deadline`] in virtual time.
pub struct TestDeadline {
    runtime: TestRuntime,
    /// Armed for this much virtual time since start.
    at: Option<Duration>,
    timer: Option<TimerKey>,
    waiters: Rc<WaiterList>,
}

impl Deadline for TestDeadline {
    fn set(&mut self, at: Option<Instant>) {
        if let Some(timer) = self.timer.take() {
            self.runtime.cancel(timer);
        }
        self.at = at.map(|at| at.saturating_duration_since(self.runtime.inner.epoch));
        if let Some(at) = self.at {
            let waiters = self.waiters.clone();
            self.timer = Some(self.runtime.schedule(at, move || waiters.wake_all()));
        }
    }

    fn poll(&mut self, waiter: &Waiter) -> Poll<()> {
        match self.at {
            Some(at) if at <= self.runtime.elapsed() => Poll::Ready(()),
            _ => {
                self.waiters.register(waiter);
                Poll::Pending
            }
        }
    }
}

impl Drop for TestDeadline {
    fn drop(&mut self) {
        if let Some(timer) = self.timer.take() {
            self.runtime.cancel(timer);
        }
    }
}

impl std::fmt::Debug for TestDeadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestDeadline")
            .field("at", &self.at)
            .finish()
    }
}

/// Runs `test` with a runtime seeded from `MOQ_TEST_SEED` (or `default_seed`) whose virtual
/// time starts at `epoch`; if it panics, the panic message names the seed, so that the
/// failing run can be replayed exactly.
pub fn seeded(default_seed: u64, epoch: Instant, test: impl FnOnce(&TestRuntime)) {
    let seed = std::env::var("MOQ_TEST_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default_seed);
    let runtime = TestRuntime::new(seed, epoch);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| test(&runtime)));
    if let Err(panic) = result {
        let message = panic
            .downcast_ref::<&str>()
            .map(|text| text.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "the test panicked".into());
        panic!("{message}\nfailing seed: MOQ_TEST_SEED={seed}");
    }
}
