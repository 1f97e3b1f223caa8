//! The synchronization shim: std types normally, loom's under `--cfg loom`.
//!
//! Every lock, atomic and `UnsafeCell` in kio comes from here, so that the loom models in
//! `tests/loom.rs` explore every interleaving of the real code, not of a copy.
//!
//! Two deliberate exceptions use std types in both builds: the `Arc`/`Weak` pair that links
//! log chunks (loom has no `Weak`; std's reference counts are trusted, our own atomics and
//! cells around them are still modelled).

#[cfg(loom)]
pub(crate) use loom::sync::Arc;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};

#[cfg(not(loom))]
pub(crate) use std::sync::Arc;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};

/// A mutex that ignores poisoning.
///
/// kio never panics while holding a lock on its own; a panic in user code called under a
/// lock (a `Producer::update` closure) leaves the value as the closure left it, which is
/// what the next reader should see, so poisoning carries no information worth a panic.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T> {
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
    #[cfg(not(loom))]
    inner: std::sync::Mutex<T>,
}

/// The guard of [`Mutex`].
#[cfg(loom)]
pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;
/// The guard of [`Mutex`].
#[cfg(not(loom))]
pub(crate) type MutexGuard<'a, T> = std::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            #[cfg(loom)]
            inner: loom::sync::Mutex::new(value),
            #[cfg(not(loom))]
            inner: std::sync::Mutex::new(value),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// An `UnsafeCell` with loom's closure-based access API, so that loom can check every access
/// for data races. The std build compiles down to a plain `UnsafeCell`.
#[derive(Debug)]
pub(crate) struct UnsafeCell<T> {
    #[cfg(loom)]
    inner: loom::cell::UnsafeCell<T>,
    #[cfg(not(loom))]
    inner: std::cell::UnsafeCell<T>,
}

impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            #[cfg(loom)]
            inner: loom::cell::UnsafeCell::new(value),
            #[cfg(not(loom))]
            inner: std::cell::UnsafeCell::new(value),
        }
    }

    /// Shared access. The caller guarantees no concurrent `with_mut`.
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        #[cfg(loom)]
        return self.inner.with(f);
        #[cfg(not(loom))]
        return f(self.inner.get());
    }

    /// Exclusive access. The caller guarantees no concurrent `with` or `with_mut`.
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(loom)]
        return self.inner.with_mut(f);
        #[cfg(not(loom))]
        return f(self.inner.get());
    }
}
