//! Waiting for something unless the session ends first.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;

use moq_net::session::Session;

/// `future`'s output, or the session's end as an error if it comes first.
pub(crate) async fn or_closed<T>(
    session: &Session,
    future: impl Future<Output = T>,
) -> Result<T, moq_net::Error> {
    let mut future = pin!(future);
    let mut closed = pin!(session.closed());
    std::future::poll_fn(|context| {
        if let Poll::Ready(value) = future.as_mut().poll(context) {
            return Poll::Ready(Ok(value));
        }
        closed.as_mut().poll(context).map(Err)
    })
    .await
}
