//! The runtime of one simulated host: its tasks on one thread, its deadlines in a wheel.
//!
//! What the io_uring worker does for its session machines, without the ring: a task is
//! polled only when something woke it, and a deadline is a slot in a timer wheel. The
//! meter calls [`LocalRuntime::run`] and [`LocalRuntime::expire`] from its own loop, so
//! there is nothing to park on; a host whose tasks are all waiting costs nothing.
//!
//! Written by hand because the meter must poll each host's tasks at a point of its own
//! choosing (inside the relay's measured turn, outside the clients'), which no async
//! runtime's local executor allows.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use moqx_kio::Waiter;
use moqx_net::runtime::{Deadline, Runtime};
use moqx_net::session::SessionMachine;
use moqx_runtime::binding::BindingSession;
use moqx_runtime::deadlines::DeadlineSlots;

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Runs session machines and other tasks of one host.
#[derive(Clone)]
pub struct LocalRuntime {
    local: Rc<Local>,
}

/// A deadline of a [`LocalRuntime`]: a slot in its wheel.
pub struct LocalDeadline {
    local: Rc<Local>,
    /// Taken on the first `set`.
    slot: Option<u32>,
}

struct Local {
    tasks: RefCell<Tasks>,
    ready: Arc<Ready>,
    deadlines: RefCell<DeadlineSlots>,
}

#[derive(Default)]
struct Tasks {
    /// `None` while the task is polled, or once it finished.
    slots: Vec<Option<Task>>,
    wakers: Vec<Option<(Waker, Arc<TaskWaker>)>>,
    free: Vec<usize>,
    /// The ready list taken for one run, kept for its allocation.
    running: Vec<usize>,
}

/// The tasks woken since the last run, by slot.
#[derive(Default)]
struct Ready(Mutex<Vec<usize>>);

struct TaskWaker {
    ready: Arc<Ready>,
    slot: usize,
    /// Set while the task is in the ready list: it is queued once however often woken.
    queued: AtomicBool,
}

impl LocalRuntime {
    /// A runtime with no tasks, its wheel's clock starting at `now`.
    pub fn new(now: Instant) -> Self {
        Self {
            local: Rc::new(Local {
                tasks: RefCell::default(),
                ready: Arc::default(),
                deadlines: RefCell::new(DeadlineSlots::new(now)),
            }),
        }
    }

    /// Adds `future` as a task, polled in the next [`run`](Self::run).
    pub fn spawn_task(&self, future: impl Future<Output = ()> + 'static) {
        let slot = {
            let mut tasks = self.local.tasks.borrow_mut();
            match tasks.free.pop() {
                Some(slot) => {
                    tasks.slots[slot] = Some(Box::pin(future));
                    tasks.wakers[slot] = None;
                    slot
                }
                None => {
                    tasks.slots.push(Some(Box::pin(future)));
                    tasks.wakers.push(None);
                    tasks.slots.len() - 1
                }
            }
        };
        lock(&self.local.ready.0).push(slot);
    }

    /// Whether a task was woken and waits for [`run`](Self::run).
    pub fn has_ready(&self) -> bool {
        !lock(&self.local.ready.0).is_empty()
    }

    /// Polls each task woken since the last run once; tasks woken meanwhile wait for the
    /// next run. Returns how many ran.
    pub fn run(&self) -> usize {
        let mut running = std::mem::take(&mut self.local.tasks.borrow_mut().running);
        std::mem::swap(&mut running, &mut *lock(&self.local.ready.0));
        let ran = running.len();
        for &slot in &running {
            let (task, waker) = {
                let mut tasks = self.local.tasks.borrow_mut();
                let Some(task) = tasks.slots.get_mut(slot).and_then(Option::take) else {
                    continue; // finished, or a stale wake
                };
                let ready = self.local.ready.clone();
                let (waker, task_waker) = tasks.wakers[slot].get_or_insert_with(|| {
                    let task_waker = Arc::new(TaskWaker {
                        ready,
                        slot,
                        queued: AtomicBool::new(true),
                    });
                    (Waker::from(task_waker.clone()), task_waker)
                });
                task_waker.queued.store(false, Ordering::Release);
                (task, waker.clone())
            };
            // No borrow is held: the task may spawn.
            let mut task = task;
            let done = task
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_ready();
            let mut tasks = self.local.tasks.borrow_mut();
            if done {
                tasks.wakers[slot] = None;
                tasks.free.push(slot);
            } else {
                tasks.slots[slot] = Some(task);
            }
        }
        running.clear();
        self.local.tasks.borrow_mut().running = running;
        ran
    }

    /// Fires the deadlines due at `now`.
    pub fn expire(&self, now: Instant) {
        self.local.deadlines.borrow_mut().expire(now);
    }

    /// The earliest armed deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.local.deadlines.borrow().next_deadline()
    }
}

impl Runtime for LocalRuntime {
    type Transport = BindingSession;
    type Deadline = LocalDeadline;

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn deadline(&self) -> LocalDeadline {
        LocalDeadline {
            local: self.local.clone(),
            slot: None,
        }
    }

    fn spawn(&self, machine: SessionMachine<Self>) {
        self.spawn_task(machine);
    }
}

impl Deadline for LocalDeadline {
    fn set(&mut self, at: Option<Instant>) {
        let mut deadlines = self.local.deadlines.borrow_mut();
        match at {
            None => {
                if let Some(slot) = self.slot {
                    deadlines.disarm(slot);
                }
            }
            Some(at) => {
                let slot = *self.slot.get_or_insert_with(|| deadlines.take());
                deadlines.arm(slot, at);
            }
        }
    }

    fn poll(&mut self, waiter: &Waiter) -> Poll<()> {
        match self.slot {
            Some(slot) => self.local.deadlines.borrow_mut().poll(slot, waiter),
            None => Poll::Pending,
        }
    }
}

impl Drop for LocalDeadline {
    fn drop(&mut self) {
        if let Some(slot) = self.slot
            && let Ok(mut deadlines) = self.local.deadlines.try_borrow_mut()
        {
            deadlines.release(slot);
        }
    }
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            lock(&self.ready.0).push(self.slot);
        }
    }
}

impl std::fmt::Debug for LocalRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalRuntime").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for LocalDeadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalDeadline")
            .field("slot", &self.slot)
            .finish()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
