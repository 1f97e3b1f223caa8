//! The `moqx_net` runtime on an io_uring worker: machines on the worker's executor, timers
//! in its wheel.
//!
//! [`UringRuntime`] is `!Send`: it, and every session machine and deadline made from it,
//! stays on the worker thread it was made on. A session's [`Session`](moqx_net::session::Session)
//! handle is `Send + Sync` as on every driver, and the model (tracks, broadcasts) is shared
//! across workers; only the machines are local.
//!
//! Deadlines cost no system call: each is a slot in the worker's timer wheel, and the
//! worker parks once per turn on the earliest of them and of its connections' timeouts
//! (DESIGN.md, "Timers").

use std::cell::RefCell;
use std::rc::Rc;
use std::task::Poll;
use std::time::Instant;

use moqx_kio::Waiter;
use moqx_net::runtime::{Deadline, Runtime};
use moqx_net::session::SessionMachine;
use moqx_runtime::binding::BindingSession;
use moqx_runtime::deadlines::DeadlineSlots;

use crate::executor::Executor;

/// Runs session machines on the worker that made it.
#[derive(Clone)]
pub struct UringRuntime {
    local: Rc<Local>,
}

/// A session machine's timer: a slot in its worker's wheel.
pub struct UringDeadline {
    local: Rc<Local>,
    /// Taken on the first `set`.
    slot: Option<u32>,
}

/// What the worker's tasks share: the executor and the deadlines.
pub(crate) struct Local {
    pub(crate) executor: Executor,
    pub(crate) timers: RefCell<DeadlineSlots>,
}

impl UringRuntime {
    pub(crate) fn new(local: Rc<Local>) -> Self {
        Self { local }
    }

    /// Runs `future` on this worker as a task of its own (for example, a handler per
    /// accepted session).
    pub fn spawn_local(&self, future: impl std::future::Future<Output = ()> + 'static) {
        self.local.executor.spawn(future);
    }
}

impl Runtime for UringRuntime {
    type Transport = BindingSession;
    type Deadline = UringDeadline;

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn deadline(&self) -> UringDeadline {
        UringDeadline {
            local: self.local.clone(),
            slot: None,
        }
    }

    fn spawn(&self, machine: SessionMachine<Self>) {
        self.local.executor.spawn(machine);
    }
}

impl Deadline for UringDeadline {
    fn set(&mut self, at: Option<Instant>) {
        let mut timers = self.local.timers.borrow_mut();
        match at {
            None => {
                if let Some(slot) = self.slot {
                    timers.disarm(slot);
                }
            }
            Some(at) => {
                let slot = *self.slot.get_or_insert_with(|| timers.take());
                timers.arm(slot, at);
            }
        }
    }

    fn poll(&mut self, waiter: &Waiter) -> Poll<()> {
        match self.slot {
            Some(slot) => self.local.timers.borrow_mut().poll(slot, waiter),
            None => Poll::Pending,
        }
    }
}

impl Drop for UringDeadline {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            // A deadline dropped while the worker expires timers (by a task it woke) finds
            // the wheel borrowed; that cannot happen, the wakes only queue tasks.
            if let Ok(mut timers) = self.local.timers.try_borrow_mut() {
                timers.release(slot);
            }
        }
    }
}

impl Local {
    pub(crate) fn new(now: Instant, shared: std::sync::Arc<crate::executor::Shared>) -> Self {
        Self {
            executor: Executor::new(shared),
            timers: RefCell::new(DeadlineSlots::new(now)),
        }
    }
}

impl std::fmt::Debug for UringRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringRuntime")
            .field("tasks", &self.local.executor.len())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for UringDeadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringDeadline")
            .field("slot", &self.slot)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Wake, Waker};
    use std::time::Duration;

    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_deadline_fires_once_its_time_passes_and_wakes_its_task() {
        let start = Instant::now();
        let runtime = UringRuntime::new(Rc::new(Local::new(start, Default::default())));
        let wakes = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waiter = Waiter::new(&Waker::from(wakes.clone()));
        let mut deadline = runtime.deadline();
        assert!(deadline.poll(&waiter).is_pending(), "disarmed");

        deadline.set(Some(start + Duration::from_millis(10)));
        assert!(deadline.poll(&waiter).is_pending());
        let next = runtime.local.timers.borrow().next_deadline();
        assert!(next.is_some_and(|at| at >= start + Duration::from_millis(10)));

        runtime
            .local
            .timers
            .borrow_mut()
            .expire(start + Duration::from_millis(5));
        assert!(deadline.poll(&waiter).is_pending(), "not yet");
        runtime
            .local
            .timers
            .borrow_mut()
            .expire(start + Duration::from_millis(20));
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        assert!(deadline.poll(&waiter).is_ready());
        assert!(
            deadline.poll(&waiter).is_ready(),
            "stays ready until re-armed"
        );

        deadline.set(Some(start + Duration::from_millis(100)));
        assert!(deadline.poll(&waiter).is_pending(), "re-armed");
        deadline.set(None);
        assert_eq!(runtime.local.timers.borrow().armed(), 0);
        runtime
            .local
            .timers
            .borrow_mut()
            .expire(start + Duration::from_secs(1));
        assert!(
            deadline.poll(&waiter).is_pending(),
            "disarmed deadlines never fire"
        );
    }

    #[test]
    fn a_dropped_deadline_frees_its_slot_and_its_timer() {
        let start = Instant::now();
        let runtime = UringRuntime::new(Rc::new(Local::new(start, Default::default())));
        let mut first = runtime.deadline();
        first.set(Some(start + Duration::from_secs(1)));
        drop(first);
        assert_eq!(runtime.local.timers.borrow().armed(), 0);
        let mut second = runtime.deadline();
        second.set(Some(start + Duration::from_secs(2)));
        assert_eq!(second.slot, Some(0), "the slot was reused");
    }
}
