//! [`wait`]: turn a `poll_*(&Waiter)` closure into a [`Future`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::Waiter;

/// Turns a poll closure into a future.
///
/// The future owns a [`Waiter`], refreshes its waker on every poll, and calls `poll` with it
/// until it returns `Ready`. Dropping the future drops the waiter, which deregisters it
/// everywhere. This is how every `async` method in kio is written.
///
/// ```
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// use moqx_kio::{Queue, wait};
///
/// let queue = Queue::unbounded();
/// queue.try_push(7).unwrap();
/// let value = block_on(wait(|waiter| queue.poll_pop(waiter)));
/// assert_eq!(value, Some(7));
/// ```
pub fn wait<F, R>(poll: F) -> Wait<F>
where
    F: FnMut(&Waiter) -> Poll<R>,
{
    Wait { poll, waiter: None }
}

/// The future returned by [`wait`].
#[must_use = "futures do nothing unless polled"]
pub struct Wait<F> {
    poll: F,
    waiter: Option<Waiter>,
}

impl<F, R> Future for Wait<F>
where
    F: FnMut(&Waiter) -> Poll<R> + Unpin,
{
    type Output = R;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        let this = self.get_mut();
        let waiter = match &this.waiter {
            Some(waiter) => {
                waiter.set_waker(cx.waker());
                waiter
            }
            None => this.waiter.insert(Waiter::new(cx.waker())),
        };
        (this.poll)(waiter)
    }
}

impl<F> fmt::Debug for Wait<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wait")
            .field("waiter", &self.waiter)
            .finish_non_exhaustive()
    }
}

/// Runs `future` until it completes (`Ok` with its output), or until `stop` is ready first
/// (`Err` with stop's output): how a wait is cut short by something that is polled rather
/// than awaited (a session's or a handle's close). `future` is polled first, so a value
/// ready at the moment of the stop is not lost.
///
/// ```
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// use std::task::Poll;
///
/// let never = std::future::pending::<u32>();
/// let stopped = block_on(moqx_kio::unless(never, |_waiter| Poll::Ready("closed")));
/// assert_eq!(stopped, Err("closed"));
/// let done = block_on(moqx_kio::unless(async { 7 }, |_waiter| Poll::Ready("closed")));
/// assert_eq!(done, Ok(7));
/// ```
pub async fn unless<T, S>(
    future: impl Future<Output = T>,
    mut stop: impl FnMut(&Waiter) -> Poll<S>,
) -> Result<T, S> {
    let mut future = std::pin::pin!(future);
    let mut waiter: Option<Waiter> = None;
    std::future::poll_fn(|context| {
        if let Poll::Ready(value) = future.as_mut().poll(context) {
            return Poll::Ready(Ok(value));
        }
        let waiter = match &waiter {
            Some(waiter) => {
                waiter.set_waker(context.waker());
                waiter
            }
            None => waiter.insert(Waiter::new(context.waker())),
        };
        stop(waiter).map(Err)
    })
    .await
}
