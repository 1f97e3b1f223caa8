//! Waiting on a JavaScript promise from a `poll_*` method.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use js_sys::Promise;
use moqx_kio::Waiter;
use wasm_bindgen::JsValue;
use wasm_bindgen_futures::JsFuture;

/// At most one promise in flight, started on demand and polled with a [`Waiter`]'s waker.
///
/// Dropping it before the promise settles is safe: the promise's handlers outlive the
/// future, and a rejection is still handled (never an "uncaught in promise" on the
/// console).
#[derive(Debug, Default)]
pub(crate) struct PendingPromise {
    future: Option<JsFuture>,
}

impl PendingPromise {
    /// Polls the promise in flight, starting one with `start` if there is none. `Ready`
    /// once it settles (and the next call starts a new one).
    pub(crate) fn poll(
        &mut self,
        waiter: &Waiter,
        start: impl FnOnce() -> Promise,
    ) -> Poll<Result<JsValue, JsValue>> {
        let future = self.future.get_or_insert_with(|| JsFuture::from(start()));
        // No waker (the waiter was never given one): nothing could wake the caller.
        let Some(waker) = waiter.waker() else {
            return Poll::Pending;
        };
        let result = std::task::ready!(Pin::new(future).poll(&mut Context::from_waker(&waker)));
        self.future = None;
        Poll::Ready(result)
    }
}

/// Lets a promise settle on its own: its outcome is handled (a rejection is not reported as
/// uncaught) and ignored. For writes whose failure shows up elsewhere, on the writer's
/// `closed` or `ready`.
pub(crate) fn detach(promise: Promise) {
    drop(JsFuture::from(promise));
}
