//! Waking a parked worker from another thread: one futex word per worker.
//!
//! A worker parks inside `io_uring_enter`, with an `IORING_OP_FUTEX_WAIT` on its word among
//! the operations it waits for. A waker on another thread (a publisher on another core
//! whose frame a session here reads) queues its task, then [`Unparker::unpark`]s: one
//! atomic swap, and a `futex` wake system call only when the worker is really parked. A
//! worker that is running, or that was already woken, costs the waker nothing more.
//!
//! The protocol on the word:
//! - the worker stores [`PARKED`] before its last look for work, and waits (the futex wait
//!   armed with [`PARKED`] as the expected value) only if it found none;
//! - a waker swaps in [`NOTIFIED`] after queueing its work, and calls `futex` wake if it
//!   swapped out [`PARKED`];
//! - the worker stores [`RUNNING`] when it wakes.
//!
//! So a wake between the worker's last look and its wait either finds [`PARKED`] (and
//! wakes the wait, or makes a wait submitted after it complete at once: the word no longer
//! holds the expected value) or is seen by the look.

use std::sync::atomic::{AtomicU32, Ordering};

/// The worker is running its turn: a waker only has to leave its work queued.
pub(crate) const RUNNING: u32 = 0;
/// The worker is about to wait, or waiting: a waker must wake the futex.
pub(crate) const PARKED: u32 = 1;
/// A waker came since the worker last woke.
pub(crate) const NOTIFIED: u32 = 2;

/// The word a worker parks on.
#[derive(Debug, Default)]
pub(crate) struct Unparker {
    word: AtomicU32,
}

impl Unparker {
    /// Tells the worker it has work: a system call only if it is parked.
    pub(crate) fn unpark(&self) {
        if self.word.swap(NOTIFIED, Ordering::SeqCst) == PARKED {
            futex_wake(&self.word);
        }
    }

    /// The worker is about to look for work one last time before waiting.
    pub(crate) fn prepare_park(&self) {
        self.word.store(PARKED, Ordering::SeqCst);
    }

    /// The worker is running (it found work, or woke).
    pub(crate) fn running(&self) {
        self.word.store(RUNNING, Ordering::SeqCst);
    }

    /// Whether a waker came since [`prepare_park`](Self::prepare_park).
    pub(crate) fn notified(&self) -> bool {
        self.word.load(Ordering::SeqCst) == NOTIFIED
    }

    /// The word's address, for the ring's futex wait.
    pub(crate) fn word(&self) -> *const u32 {
        self.word.as_ptr()
    }
}

/// Wakes one waiter on `word`: a private futex, as the ring's wait is (`FUTEX2_PRIVATE`).
fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned u32 for the duration of the call; FUTEX_WAKE only
    // reads the address to find waiters and never writes to it.
    let woken = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        )
    };
    if woken < 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "futex wake failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_worker_costs_a_waker_no_system_call() {
        let unparker = Unparker::default();
        unparker.running();
        unparker.unpark();
        assert!(
            unparker.notified(),
            "the wake is recorded for the next look"
        );
    }

    #[test]
    fn a_wake_after_prepare_park_is_seen_by_the_last_look() {
        let unparker = Unparker::default();
        unparker.prepare_park();
        assert!(!unparker.notified());
        // A waker on another thread: it finds PARKED and makes the system call (which
        // wakes nobody here, and must not fail).
        std::thread::scope(|scope| {
            scope.spawn(|| unparker.unpark());
        });
        assert!(unparker.notified());
    }
}
