//! The test runtime's executor: single-threaded, deterministic, FIFO.
//!
//! Written here rather than taken from a crate because its one job is determinism: tasks run
//! in the order they were woken, a wake during a poll queues the task again, and nothing
//! depends on threads or real time.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};

type Task = Pin<Box<dyn Future<Output = ()>>>;

#[derive(Default)]
pub(super) struct Executor {
    /// Task slots; a finished task leaves `None`. A task being polled is taken out of its
    /// slot, so that it can spawn others.
    tasks: RefCell<Vec<Option<Task>>>,
    wakers: RefCell<Vec<Arc<TaskWaker>>>,
    ready: Arc<ReadyQueue>,
}

#[derive(Default)]
struct ReadyQueue {
    queue: Mutex<VecDeque<usize>>,
}

struct TaskWaker {
    index: usize,
    queued: AtomicBool,
    ready: Arc<ReadyQueue>,
}

impl Executor {
    pub(super) fn spawn(&self, task: Task) {
        let mut tasks = self.tasks.borrow_mut();
        let index = tasks.len();
        tasks.push(Some(task));
        let waker = Arc::new(TaskWaker {
            index,
            queued: AtomicBool::new(false),
            ready: self.ready.clone(),
        });
        waker.schedule();
        self.wakers.borrow_mut().push(waker);
    }

    /// Polls ready tasks until none is ready.
    pub(super) fn run_until_stalled(&self) {
        loop {
            let next = self
                .ready
                .queue
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front();
            let Some(index) = next else {
                return;
            };
            let task_waker = self.wakers.borrow()[index].clone();
            // A wake from now on (during the poll too) queues the task again.
            task_waker.queued.store(false, Ordering::Release);
            let waker = Waker::from(task_waker);
            let task = self.tasks.borrow_mut()[index].take();
            let Some(mut task) = task else {
                continue; // finished
            };
            let mut context = Context::from_waker(&waker);
            if task.as_mut().poll(&mut context).is_pending() {
                self.tasks.borrow_mut()[index] = Some(task);
            }
        }
    }
}

impl TaskWaker {
    fn schedule(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.ready
                .queue
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push_back(self.index);
        }
    }
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.schedule();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.schedule();
    }
}
