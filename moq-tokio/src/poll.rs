//! Running a `poll(&Waiter)` state machine (such as a WebTransport handshake) as a future.

use std::task::Poll;

use moqx_kio::Waiter;

/// Polls `step` with a waiter that wakes the calling task, until it is ready.
pub(crate) async fn drive<T>(mut step: impl FnMut(&Waiter) -> Poll<T>) -> T {
    let mut waiter: Option<Waiter> = None;
    std::future::poll_fn(|cx| {
        let waiter = waiter.get_or_insert_with(|| Waiter::new(cx.waker()));
        waiter.set_waker(cx.waker());
        step(waiter)
    })
    .await
}
