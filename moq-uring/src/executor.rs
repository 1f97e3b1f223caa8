//! The worker's task executor: `!Send` futures on one thread, woken from any thread.
//!
//! Tasks (session machines, WebTransport handshakes, the application's accept loop) live
//! in a slab on the worker and are never moved to another thread, so they may hold `Rc`
//! and `RefCell`. Their wakers are `Send + Sync` (a waker travels wherever the task waits:
//! a track written on another core wakes it from there): a wake queues the task's slot in
//! the worker's ready list and [`Unparker::unpark`]s the worker. A task is queued at most
//! once however often it is woken before it runs.
//!
//! Written by hand because the executor must be polled from the worker's own loop (between
//! ring completions and sends, once per turn) and park inside the ring's wait; the local
//! executors of async runtimes run their own loops.

use std::cell::RefCell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};

use crate::wake::Unparker;

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Runs the worker's tasks.
pub(crate) struct Executor {
    slots: RefCell<Slots>,
    shared: Arc<Shared>,
    /// The ready list taken for one [`run`](Self::run), kept for its allocation.
    running: RefCell<Vec<(u32, u32)>>,
}

/// The tasks, by slot.
#[derive(Default)]
struct Slots {
    entries: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
}

struct Slot {
    /// Bumped each time the slot is reused, so that a stale wake is ignored.
    generation: u32,
    /// `None` while the task is being polled (or the slot is free).
    task: Option<Task>,
    waker: Option<(Waker, Arc<TaskWaker>)>,
}

/// What wakers on any thread reach.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Slots (and generations) woken since the last run.
    ready: Mutex<Vec<(u32, u32)>>,
    /// The worker's futex word.
    pub(crate) unparker: Unparker,
}

struct TaskWaker {
    shared: Arc<Shared>,
    slot: u32,
    generation: u32,
    /// Set while the task is in the ready list.
    queued: AtomicBool,
}

impl Executor {
    /// An executor with no tasks, woken through `shared`.
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            slots: RefCell::new(Slots::default()),
            shared,
            running: RefCell::new(Vec::new()),
        }
    }

    /// What wakers reach: the ready list and the futex word.
    #[cfg(test)]
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// How many tasks have not finished.
    pub(crate) fn len(&self) -> usize {
        self.slots.borrow().live
    }

    /// Adds `future` as a task, to be polled in the next [`run`](Self::run). May be called
    /// from inside a task.
    pub(crate) fn spawn(&self, future: impl Future<Output = ()> + 'static) {
        let (slot, generation) = {
            let mut slots = self.slots.borrow_mut();
            slots.live += 1;
            match slots.free.pop() {
                Some(slot) => {
                    let entry = &mut slots.entries[slot as usize];
                    entry.generation = entry.generation.wrapping_add(1);
                    entry.task = Some(Box::pin(future));
                    entry.waker = None;
                    (slot, entry.generation)
                }
                None => {
                    let slot = u32::try_from(slots.entries.len()).expect("fewer than 2^32 tasks");
                    slots.entries.push(Slot {
                        generation: 0,
                        task: Some(Box::pin(future)),
                        waker: None,
                    });
                    (slot, 0)
                }
            }
        };
        self.shared.queue(slot, generation);
    }

    /// Drops every task (a stopping worker's), unfinished.
    pub(crate) fn clear(&self) {
        let tasks: Vec<Task> = {
            let mut slots = self.slots.borrow_mut();
            slots.live = 0;
            slots.free.clear();
            slots
                .entries
                .drain(..)
                .filter_map(|slot| slot.task)
                .collect()
        };
        // Dropped outside the borrow: a task's drop may touch the executor.
        drop(tasks);
    }

    /// Whether a task is ready to run.
    pub(crate) fn has_ready(&self) -> bool {
        !lock(&self.shared.ready).is_empty()
    }

    /// Polls every task woken since the last run, once each; returns how many ran. Tasks
    /// woken while this runs (by themselves or each other) wait for the next run, so that
    /// one run is bounded and the worker's I/O gets its turn.
    pub(crate) fn run(&self) -> usize {
        let mut running = self.running.borrow_mut();
        std::mem::swap(&mut *running, &mut lock(&self.shared.ready));
        let mut ran = 0;
        for (slot, generation) in running.drain(..) {
            let (mut task, waker) = {
                let mut slots = self.slots.borrow_mut();
                let Some(entry) = slots.entries.get_mut(slot as usize) else {
                    continue;
                };
                if entry.generation != generation {
                    continue; // a wake for a task that finished; the slot was reused
                }
                let Some(task) = entry.task.take() else {
                    continue; // finished
                };
                let (waker, task_waker) = entry.waker.get_or_insert_with(|| {
                    let task_waker = Arc::new(TaskWaker {
                        shared: self.shared.clone(),
                        slot,
                        generation,
                        queued: AtomicBool::new(true),
                    });
                    (Waker::from(task_waker.clone()), task_waker)
                });
                // Wakes from here on queue the task again.
                task_waker.queued.store(false, Ordering::Release);
                (task, waker.clone())
            };
            ran += 1;
            // No borrow of the slots is held: the task may spawn. A task that panics (a
            // bug in a session machine) ends alone, as on tokio: the worker's other
            // sessions go on. Its state may be half-updated, so it is dropped, not polled
            // again (and a panic in its drop is contained too).
            let polled = std::panic::catch_unwind(AssertUnwindSafe(|| {
                task.as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_ready()
            }));
            let done = match polled {
                Ok(done) => done,
                Err(_) => {
                    tracing::error!(slot, "a task panicked; it is dropped, the worker goes on");
                    let _ = std::panic::catch_unwind(AssertUnwindSafe(move || drop(task)));
                    let mut slots = self.slots.borrow_mut();
                    slots.entries[slot as usize].waker = None;
                    slots.free.push(slot);
                    slots.live -= 1;
                    continue;
                }
            };
            let mut slots = self.slots.borrow_mut();
            if done {
                let entry = &mut slots.entries[slot as usize];
                entry.waker = None;
                slots.free.push(slot);
                slots.live -= 1;
            } else {
                slots.entries[slot as usize].task = Some(task);
            }
        }
        ran
    }
}

impl Shared {
    fn queue(&self, slot: u32, generation: u32) {
        lock(&self.ready).push((slot, generation));
        self.unparker.unpark();
    }
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.shared.queue(self.slot, self.generation);
        }
    }
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("tasks", &self.len())
            .finish_non_exhaustive()
    }
}

/// The ready list's lock: a waker that panicked while pushing left a valid list.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs until no task is ready; returns how many polls that took.
#[cfg(test)]
fn run_until_idle(executor: &Executor) -> usize {
    let mut total = 0;
    loop {
        let ran = executor.run();
        if ran == 0 {
            return total;
        }
        total += ran;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;
    use std::task::Poll;

    /// A future that is pending until `open`, registering its waker each poll.
    struct Gate {
        open: Arc<AtomicBool>,
        waker: Arc<Mutex<Option<Waker>>>,
        polls: Rc<Cell<usize>>,
    }

    impl Future for Gate {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.set(self.polls.get() + 1);
            if self.open.load(Ordering::Acquire) {
                return Poll::Ready(());
            }
            *lock(&self.waker) = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    #[test]
    fn a_task_holding_an_rc_runs_and_finishes() {
        let executor = Executor::new(Arc::default());
        let seen = Rc::new(Cell::new(0));
        let inner = seen.clone();
        executor.spawn(async move { inner.set(inner.get() + 1) });
        assert_eq!(executor.len(), 1);
        assert_eq!(run_until_idle(&executor), 1);
        assert_eq!(seen.get(), 1);
        assert_eq!(executor.len(), 0);
    }

    #[test]
    fn a_wake_from_another_thread_queues_the_task_once() {
        let executor = Executor::new(Arc::default());
        let open = Arc::new(AtomicBool::new(false));
        let waker = Arc::new(Mutex::new(None));
        let polls = Rc::new(Cell::new(0));
        executor.spawn(Gate {
            open: open.clone(),
            waker: waker.clone(),
            polls: polls.clone(),
        });
        executor.run();
        assert_eq!(polls.get(), 1);
        assert!(!executor.has_ready());

        let remote = lock(&waker).take().expect("registered");
        std::thread::scope(|scope| {
            scope.spawn(|| {
                // Three wakes before the worker runs: one poll.
                remote.wake_by_ref();
                remote.wake_by_ref();
                open.store(true, Ordering::Release);
                remote.wake_by_ref();
            });
        });
        assert!(executor.has_ready());
        assert!(executor.shared().unparker.notified(), "the worker was told");
        assert_eq!(executor.run(), 1);
        assert_eq!(polls.get(), 2);
        assert_eq!(executor.len(), 0);
    }

    #[test]
    fn a_stale_wake_does_not_poll_the_task_that_reused_the_slot() {
        let executor = Executor::new(Arc::default());
        let open = Arc::new(AtomicBool::new(false));
        let waker = Arc::new(Mutex::new(None));
        let first_polls = Rc::new(Cell::new(0));
        executor.spawn(Gate {
            open: open.clone(),
            waker: waker.clone(),
            polls: first_polls.clone(),
        });
        executor.run();
        let stale = lock(&waker).take().expect("registered");
        open.store(true, Ordering::Release);
        stale.wake_by_ref();
        executor.run(); // the first task finishes; its slot is free

        let second_polls = Rc::new(Cell::new(0));
        executor.spawn(Gate {
            open: Arc::new(AtomicBool::new(false)),
            waker: Arc::new(Mutex::new(None)),
            polls: second_polls.clone(),
        });
        executor.run();
        assert_eq!(second_polls.get(), 1);
        stale.wake_by_ref(); // the old task's waker, for the reused slot
        assert_eq!(run_until_idle(&executor), 0, "the stale wake polls nothing");
        assert_eq!(second_polls.get(), 1);
    }

    #[test]
    fn a_task_that_panics_ends_alone() {
        let executor = Executor::new(Arc::default());
        let seen = Rc::new(Cell::new(0));
        let inner = seen.clone();
        executor.spawn(async { panic!("a bug in one session machine") });
        executor.spawn(async move { inner.set(inner.get() + 1) });
        assert_eq!(run_until_idle(&executor), 2);
        assert_eq!(seen.get(), 1, "the other task ran");
        assert_eq!(executor.len(), 0, "the panicked task is gone");
        // The worker goes on: a new task runs in the freed slot.
        let inner = seen.clone();
        executor.spawn(async move { inner.set(inner.get() + 1) });
        executor.run();
        assert_eq!(seen.get(), 2);
    }

    #[test]
    fn a_task_may_spawn_while_it_runs() {
        let executor = Rc::new(Executor::new(Arc::default()));
        let seen = Rc::new(Cell::new(0));
        let (inner_executor, inner_seen) = (executor.clone(), seen.clone());
        executor.spawn(async move {
            let seen = inner_seen.clone();
            inner_executor.spawn(async move { seen.set(seen.get() + 10) });
            inner_seen.set(inner_seen.get() + 1);
        });
        assert_eq!(run_until_idle(&executor), 2);
        assert_eq!(seen.get(), 11);
    }
}
