//! The runtime boundary: how a session gets time, timers and a task to run on.
//!
//! moqx-net reads no clock and spawns nothing by itself. A driver passes a [`Runtime`] value
//! explicitly when it connects or accepts a session; the session asks it for the time
//! ([`Runtime::now`], read once per turn of the machine), for timers ([`Deadline`]), and to
//! run its machine ([`Runtime::spawn`]). There are no thread-locals and no globals, so two
//! runtimes can live in one process (a test runs a client and a relay on two virtual clocks
//! if it wants).
//!
//! `Send`-ness flows from the types: there is no `Send` bound here. The session machine is
//! `Send` exactly when the runtime's transport is, so tokio can run it on its work-stealing
//! pool while an io_uring driver keeps it on its core.
//!
//! [`test`](mod@test) (feature `test-runtime`) is a deterministic runtime with a virtual clock and an
//! in-memory transport, in which whole sessions run in milliseconds.

use std::task::Poll;

use moqx_kio::Waiter;

use crate::session::SessionMachine;
use crate::transport;

#[cfg(any(test, feature = "test-runtime"))]
pub mod test;

/// The time type at the runtime boundary: `std::time::Instant` itself on native targets,
/// and on wasm32 (where `std`'s `Instant::now` panics) one read from the browser's
/// monotonic clock (`performance.now()`), so that one `Runtime` trait serves every driver.
pub use web_time::Instant;

/// What a driver provides to the sessions it runs.
pub trait Runtime: Clone + 'static {
    /// The connection type sessions of this runtime run over.
    type Transport: transport::Session;
    /// The timer type.
    type Deadline: Deadline;

    /// The current time. Sessions read it once per turn and use it to annotate (timestamps,
    /// ages); timing decisions go through [`Deadline`]s.
    fn now(&self) -> Instant;

    /// A new disarmed timer.
    fn deadline(&self) -> Self::Deadline;

    /// Runs `machine` to completion: poll it whenever its waker fires.
    fn spawn(&self, machine: SessionMachine<Self>);
}

/// A timer owned by one machine: armed, re-armed or disarmed synchronously, polled like
/// anything else.
pub trait Deadline {
    /// Arms the timer for `at`, or disarms it with `None`. Replaces any earlier setting.
    fn set(&mut self, at: Option<Instant>);

    /// `Ready` once the armed time has passed (and stays ready until re-armed); `Pending`
    /// while armed for later, or while disarmed, after registering `waiter`.
    fn poll(&mut self, waiter: &Waiter) -> Poll<()>;
}
