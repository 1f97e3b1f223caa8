//! # moqx-kio: runtime-free async primitives
//!
//! The building blocks of the MoQ workspace's pub/sub model and session machines. kio **is**
//! a small set of poll-based synchronization types; it **is not** a runtime: it has no
//! executor, no timers, no I/O, no clock and no dependencies, so the same types work under
//! tokio, io_uring thread-per-core, the browser and a deterministic virtual-time test
//! runtime.
//!
//! | type | for |
//! |---|---|
//! | [`Waiter`], [`WaiterList`], [`WaiterSlot`] | parking a task on shared state and waking it again (a slot: one waiter, under its owner's lock) |
//! | [`wait`] | turning any `poll_*(&Waiter)` closure into a `Future` |
//! | [`Producer`], [`Consumer`] | a watch-style cell for control state, with consumer counting |
//! | [`Queue`] | a FIFO, bounded or unbounded, that drains then reports closed |
//! | [`log::LogWriter`], [`log::LogReader`], [`log::LogHandle`] | an append-only log whose readers take no lock: fanout of published data |
//!
//! # The poll convention
//!
//! Every blocking operation exists first as `poll_*(&self, &Waiter) -> Poll<_>`, then as a
//! thin `async fn` built with [`wait`]. State machines that own their own waiters call the
//! poll form; application code awaits the async form. A `poll_*` method that returns
//! `Pending` has registered the waiter, and the waiter is woken after any internal lock is
//! released.
//!
//! ```
//! use moqx_kio::{Producer, Queue};
//!
//! // A control cell: the session's state, watched by whoever cares.
//! let status = Producer::new("connecting");
//! let watcher = status.consume();
//!
//! // A command queue into a state machine.
//! let commands = Queue::unbounded();
//! commands.try_push("subscribe video").unwrap();
//!
//! status.update(|s| *s = "connected");
//! assert_eq!(*watcher.borrow(), "connected");
//! assert_eq!(pollster::block_on(commands.pop()), Some("subscribe video"));
//! ```
//!
//! # Testing
//!
//! Every lock, atomic and cell comes from the [`sync`] shim, which switches to [loom] under
//! `RUSTFLAGS="--cfg loom"`; `tests/loom.rs` model-checks lost wakeups, close racing drops,
//! queue push/pop/close, waiter reuse and the log's publication protocol
//! (`cargo xtask loom`).
//!
//! [loom]: https://docs.rs/loom

mod wait;

pub mod sync;

pub mod log;
pub mod queue;
pub mod waiter;
pub mod watch;

#[cfg(all(test, not(loom)))]
mod test_util;

pub use queue::Queue;
pub use wait::{Wait, unless, wait};
pub use waiter::{Waiter, WaiterList, WaiterSlot};
pub use watch::{Consumer, Producer, Ref, Write};

/// The error of an operation on something that was closed (a watch cell, a queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Closed;

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("closed")
    }
}

impl std::error::Error for Closed {}
