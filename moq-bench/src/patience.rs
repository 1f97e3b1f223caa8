//! How long the soaks wait for what is still on its way, and the wait itself.

use std::time::Duration;

/// How long the soak waits, at the end, for the last messages and frames: what has not
/// come by then is lost. Generous: after a loss, a starved machine's probe timeouts back
/// off to seconds.
pub(crate) const LAST_ARRIVALS: Duration = Duration::from_secs(30);

/// Waits until `done`, or `patience` has passed.
pub(crate) async fn wait_for(patience: Duration, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + patience;
    while !done() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
