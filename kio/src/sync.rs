//! The synchronization shim: std types normally, loom's under `--cfg loom`.
//!
//! Every lock, atomic and `UnsafeCell` in kio comes from here, so that the loom models in
//! `tests/loom.rs` explore every interleaving of the real code, not of a copy. Crates built on
//! kio (moqx-net's model) take their `Arc`, atomics and [`Mutex`] from here too, so that their
//! own loom models run over the same switch:
//!
//! ```
//! use moqx_kio::sync::{Arc, AtomicU64, Mutex, Ordering};
//!
//! let counter = Arc::new(AtomicU64::new(0));
//! counter.fetch_add(1, Ordering::Relaxed);
//! let names = Mutex::new(Vec::<String>::new());
//! names.lock().push("alice".into());
//! assert_eq!(names.lock().len(), 1);
//! ```
//!
//! loom has no `Weak`, so a private `weak` module provides the `Arc`/`Weak` pair that links
//! log chunks: std's normally, and under loom a small model whose strong count is a loom
//! atomic, so that loom sees the synchronization between a reader's last access and the drop
//! of the value.

#[cfg(loom)]
pub use loom::sync::Arc;
#[cfg(loom)]
pub use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};

#[cfg(not(loom))]
pub use std::sync::Arc;
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};

/// A mutex that ignores poisoning.
///
/// kio never panics while holding a lock on its own; a panic in user code called under a
/// lock (a `Producer::update` closure) leaves the value as the closure left it, which is
/// what the next reader should see, so poisoning carries no information worth a panic.
#[derive(Debug, Default)]
pub struct Mutex<T> {
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
    #[cfg(not(loom))]
    inner: std::sync::Mutex<T>,
}

/// The guard of [`Mutex`].
#[cfg(loom)]
pub type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;
/// The guard of [`Mutex`].
#[cfg(not(loom))]
pub type MutexGuard<'a, T> = std::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    /// A new unlocked mutex.
    pub fn new(value: T) -> Self {
        Self {
            #[cfg(loom)]
            inner: loom::sync::Mutex::new(value),
            #[cfg(not(loom))]
            inner: std::sync::Mutex::new(value),
        }
    }

    /// Locks, ignoring poison (see the type's documentation).
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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

/// `Arc` and `Weak` for values that are shared through weak links (log chunks).
pub(crate) mod weak {
    #[cfg(not(loom))]
    pub(crate) use std::sync::{Arc, Weak};

    #[cfg(loom)]
    pub(crate) use self::model::{Arc, Weak};

    /// A model of the parts of `std::sync::{Arc, Weak}` kio uses: a logical strong count on a
    /// loom atomic over a physical std `Arc` that keeps the memory while any handle exists.
    #[cfg(loom)]
    mod model {
        use std::mem::ManuallyDrop;
        use std::ops::Deref;

        use loom::cell::UnsafeCell;
        use loom::sync::atomic::{AtomicUsize, Ordering, fence};

        struct Cell<T> {
            strong: AtomicUsize,
            value: UnsafeCell<ManuallyDrop<T>>,
        }

        // SAFETY: the value is read through shared references while the strong count is
        // non-zero and dropped once, by the thread that takes the count to zero.
        unsafe impl<T: Send + Sync> Send for Cell<T> {}
        // SAFETY: as above.
        unsafe impl<T: Send + Sync> Sync for Cell<T> {}

        pub(crate) struct Arc<T> {
            cell: std::sync::Arc<Cell<T>>,
        }

        pub(crate) struct Weak<T> {
            cell: std::sync::Arc<Cell<T>>,
        }

        impl<T> Arc<T> {
            pub(crate) fn new(value: T) -> Self {
                Self {
                    cell: std::sync::Arc::new(Cell {
                        strong: AtomicUsize::new(1),
                        value: UnsafeCell::new(ManuallyDrop::new(value)),
                    }),
                }
            }

            pub(crate) fn downgrade(this: &Self) -> Weak<T> {
                Weak {
                    cell: this.cell.clone(),
                }
            }
        }

        impl<T> Clone for Arc<T> {
            fn clone(&self) -> Self {
                self.cell.strong.fetch_add(1, Ordering::Relaxed);
                Self {
                    cell: self.cell.clone(),
                }
            }
        }

        impl<T> Deref for Arc<T> {
            type Target = T;

            fn deref(&self) -> &T {
                // SAFETY: this handle holds a strong count, so the value is not dropped.
                self.cell.value.with(|value| unsafe { &**value })
            }
        }

        impl<T> Drop for Arc<T> {
            fn drop(&mut self) {
                if self.cell.strong.fetch_sub(1, Ordering::Release) == 1 {
                    fence(Ordering::Acquire);
                    // SAFETY: the count reached zero: no other handle can reach the value.
                    self.cell
                        .value
                        .with_mut(|value| unsafe { ManuallyDrop::drop(&mut *value) });
                }
            }
        }

        impl<T> Weak<T> {
            pub(crate) fn upgrade(&self) -> Option<Arc<T>> {
                let mut strong = self.cell.strong.load(Ordering::Relaxed);
                loop {
                    if strong == 0 {
                        return None;
                    }
                    match self.cell.strong.compare_exchange_weak(
                        strong,
                        strong + 1,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => {
                            return Some(Arc {
                                cell: self.cell.clone(),
                            });
                        }
                        Err(actual) => strong = actual,
                    }
                }
            }
        }
    }
}
