//! Helpers for kio's unit tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Wake, Waker};

/// A waker that counts how often it was woken.
pub(crate) struct CountingWaker {
    wakes: AtomicUsize,
}

/// The test's handle on a [`CountingWaker`].
pub(crate) struct WakeCount(Arc<CountingWaker>);

impl CountingWaker {
    pub(crate) fn pair() -> (Waker, WakeCount) {
        let inner = Arc::new(CountingWaker {
            wakes: AtomicUsize::new(0),
        });
        (Waker::from(inner.clone()), WakeCount(inner))
    }
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }
}

impl WakeCount {
    pub(crate) fn count(&self) -> usize {
        self.0.wakes.load(Ordering::SeqCst)
    }

    /// How many handles (wakers plus this one) keep the counter alive.
    pub(crate) fn handles(&self) -> usize {
        Arc::strong_count(&self.0)
    }
}
