//! The clock behind the origin's lingering ([`Origin::linger`]): each path whose last
//! route was lost stays announced for `cluster.linger_secs`, for the publisher to come
//! back by any route, and then ends.

use std::collections::VecDeque;
use std::time::Duration;

use moqx_net::model::{LingeringPath, Origin};
use tokio::time::Instant;

/// Ends each lingering path of `origin` `linger` after it began, until `stopping` turns
/// true; then (the handle dropped) every path still lingering ends at once.
pub(super) async fn run(
    origin: Origin,
    linger: Duration,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let lingering = origin.linger();
    // In the order they began, so each ends `linger` after its own start.
    let mut due: VecDeque<(Instant, LingeringPath)> = VecDeque::new();
    loop {
        let next_due = due.front().map(|(at, _)| *at);
        tokio::select! {
            path = lingering.next() => {
                tracing::debug!(path = %path.path(), ?linger, "no route left: the broadcast lingers");
                due.push_back((Instant::now() + linger, path));
            }
            () = sleep_until(next_due) => {
                if let Some((_, path)) = due.pop_front() {
                    lingering.end(&path);
                }
            }
            _ = stopping.wait_for(|stop| *stop) => break,
        }
    }
}

/// Completes at `at`; never, for `None`.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
