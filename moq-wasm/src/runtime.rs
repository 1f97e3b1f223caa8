//! The [`Runtime`] of the browser: its clock, its timers, its event loop.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

use gloo_timers::callback::Timeout;
use moqx_kio::Waiter;
use moqx_net::runtime::{Deadline, Instant, Runtime};
use moqx_net::session::SessionMachine;
use moqx_net::transport::Session;

use crate::transport::WebTransportSession;

/// Runs sessions on the page's (or worker's) event loop: a machine is a local task
/// (`spawn_local`), a deadline a `setTimeout`, the time `performance.now()`. `T` is the
/// transport its sessions run over: the browser's WebTransport
/// ([`WebTransportSession`], the default) or QMux over a WebSocket
/// ([`QmuxSession`](moqx_qmux::QmuxSession)).
///
/// Everything it runs is `!Send`, as the browser's objects are; the [`Session`] handle a
/// session returns is still `Send + Sync` (it holds no transport).
///
/// Browsers throttle timers in background tabs (to about once a second); a session there
/// still works, with coarser timeouts.
///
/// [`Session`]: moqx_net::session::Session
#[derive(Debug)]
pub struct WasmRuntime<T = WebTransportSession> {
    /// Only on the thread that made it: the machines it spawns are local tasks.
    _local: LocalTo<T>,
}

/// `!Send` and `!Sync` (an `Rc`), and tied to the transport type `T` without owning one.
type LocalTo<T> = std::marker::PhantomData<(Rc<()>, fn() -> T)>;

impl<T> Clone for WasmRuntime<T> {
    fn clone(&self) -> Self {
        Self::new()
    }
}

impl<T> Default for WasmRuntime<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> WasmRuntime<T> {
    /// A runtime for this thread's event loop.
    pub fn new() -> Self {
        Self {
            _local: std::marker::PhantomData,
        }
    }
}

impl<T: Session + 'static> Runtime for WasmRuntime<T> {
    type Transport = T;
    type Deadline = BrowserDeadline;

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn deadline(&self) -> BrowserDeadline {
        BrowserDeadline::default()
    }

    fn spawn(&self, machine: SessionMachine<Self>) {
        wasm_bindgen_futures::spawn_local(machine);
    }
}

/// A [`Deadline`] backed by one `setTimeout`, armed while someone waits on it.
///
/// Re-arming for a later time keeps the timer that is already set when it fires earlier
/// (the poll then finds the deadline not yet due and arms the rest); re-arming for an
/// earlier time replaces it. Dropping it cancels the timer.
#[derive(Debug, Default)]
pub struct BrowserDeadline {
    at: Option<Instant>,
    /// The timer set, and the time it was set for.
    timer: Option<(Instant, Timeout)>,
    /// Set by the timer when it fires: a timer that fired a little early (the browser's
    /// timer clock and `performance.now()` may disagree by a fraction of a millisecond)
    /// is re-armed, not waited on forever.
    fired: Rc<Cell<bool>>,
    /// The waker the timer wakes: the last poller's.
    waker: Rc<RefCell<Option<Waker>>>,
}

impl Deadline for BrowserDeadline {
    fn set(&mut self, at: Option<Instant>) {
        self.at = at;
        let keep = matches!((at, &self.timer), (Some(at), Some((set_for, _))) if *set_for <= at);
        if !keep {
            self.timer = None; // dropping a `Timeout` clears it
        }
    }

    fn poll(&mut self, waiter: &Waiter) -> Poll<()> {
        let Some(at) = self.at else {
            return Poll::Pending;
        };
        let now = Instant::now();
        if now >= at {
            self.timer = None;
            return Poll::Ready(());
        }
        *self.waker.borrow_mut() = waiter.waker();
        let armed = self.timer.is_some() && !self.fired.get();
        if !armed {
            let (waker, fired) = (self.waker.clone(), self.fired.clone());
            fired.set(false);
            let timeout = Timeout::new(timer_millis(at - now), move || {
                fired.set(true);
                if let Some(waker) = waker.borrow_mut().take() {
                    waker.wake();
                }
            });
            self.timer = Some((at, timeout));
        }
        Poll::Pending
    }
}

/// The longest `setTimeout` delay browsers honour: they store it as a signed 32-bit
/// count, and fire any longer delay at once.
const MAX_TIMER_MILLIS: u32 = i32::MAX as u32;

/// A `setTimeout` delay that is never short of `delay` (whole milliseconds, rounded up),
/// or the longest one browsers honour (about 24.8 days): the deadline then re-arms when
/// that fires. Review finding F18: clamping to `u32::MAX` made a far deadline fire at
/// once, in a loop.
fn timer_millis(delay: Duration) -> u32 {
    let millis = delay.as_micros().div_ceil(1000);
    u32::try_from(millis).map_or(MAX_TIMER_MILLIS, |millis| millis.min(MAX_TIMER_MILLIS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_delays_round_up_to_whole_milliseconds() {
        assert_eq!(timer_millis(Duration::ZERO), 0);
        assert_eq!(timer_millis(Duration::from_micros(1)), 1);
        assert_eq!(timer_millis(Duration::from_micros(1000)), 1);
        assert_eq!(timer_millis(Duration::from_micros(1001)), 2);
        assert_eq!(timer_millis(Duration::from_secs(u64::MAX)), 2_147_483_647);
        // 30 days: past what a browser honours, so the longest it does.
        assert_eq!(
            timer_millis(Duration::from_secs(30 * 86_400)),
            2_147_483_647
        );
        assert_eq!(
            timer_millis(Duration::from_millis(2_147_483_647)),
            2_147_483_647
        );
    }
}
