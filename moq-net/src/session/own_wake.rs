//! The waker of a session machine's own sources: it notes that the wake came from them
//! (the handle, the transport) rather than from a sub-machine, so that the machine's turn
//! polls them again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Wake, Waker};

/// Wakes the machine's task for its own waiter, noting that the wake came from the
/// machine's own sources rather than from a sub-machine.
#[derive(Default)]
pub(crate) struct OwnWake {
    pub(crate) woken: AtomicBool,
    task: std::sync::Mutex<Option<Waker>>,
}

impl OwnWake {
    pub(crate) fn set_task(&self, waker: &Waker) {
        let mut task = self.task.lock().unwrap_or_else(|e| e.into_inner());
        if !task
            .as_ref()
            .is_some_and(|current| current.will_wake(waker))
        {
            *task = Some(waker.clone());
        }
    }
}

impl Wake for OwnWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(task) = task {
            task.wake();
        }
    }
}
