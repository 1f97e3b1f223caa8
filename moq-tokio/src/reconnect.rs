//! Clients that come back by themselves: a session kept up across relays, GOAWAYs and
//! losses, while the application keeps its producers and consumers.
//!
//! [`Reconnect`] dials the first of a list of relay URLs and, whenever its session ends
//! (the relay restarted, the network dropped) or the relay says it is going away
//! (GOAWAY), dials again: the URL the GOAWAY named, else the next of the list, waiting
//! between failed attempts with jittered backoff ([`moq_net::backoff`]: 1 s doubling to
//! 10 s). After a GOAWAY the new session is made **before** the old one is closed, and
//! the two overlap for 2 s (or until the relay closes the old one), so that nothing is
//! lost while it moves.
//!
//! Every session is made from the same [`ClientConfig`], so it serves the same publish
//! origin and fills the same subscribe origin:
//!
//! - what the application publishes (its broadcasts in `session.publish`) is announced
//!   on each new session, its tracks' groups numbered on from where they were;
//! - what it subscribes to through [`Origin::follow_track`](moq_net::model::Origin::follow_track)
//!   on `session.subscribe` carries on from its first missing group once the broadcast
//!   is back on the new session.
//!
//! The session's hop id (`session.origin_id`) is drawn once if unset: it is how relays
//! downstream recognise the same publisher on its new relay, and move its subscribers
//! along instead of ending their subscriptions.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Instant;

use moq_net::Error;
use moq_net::backoff::Backoff;
use moq_net::session::Session;
use moq_runtime::client::ClientConfig;

/// A session kept up across relays (see the module docs). Dropping it (or
/// [`close`](Self::close)) closes the session and stops reconnecting.
#[derive(Debug)]
pub struct Reconnect {
    state: Arc<tokio::sync::watch::Sender<Status>>,
    task: tokio::task::JoinHandle<()>,
}

/// What the reconnecting task shares.
#[derive(Debug, Clone, Default)]
struct Status {
    /// The session up now.
    session: Option<Session>,
    /// Sessions established so far.
    connects: u64,
    /// Stopped: no session, no more attempts.
    closed: bool,
}

impl Reconnect {
    /// Starts keeping a session up to one of `urls` (tried in order, then round again)
    /// with `config`, on the current tokio runtime.
    ///
    /// # Panics
    ///
    /// If `urls` is empty.
    pub fn new(urls: Vec<String>, mut config: ClientConfig) -> Self {
        assert!(!urls.is_empty(), "Reconnect needs at least one URL");
        if config.session.origin_id == 0 {
            // Below 2^53 (browsers read hop ids as JavaScript numbers), never 0.
            config.session.origin_id = (random() & ((1 << 53) - 1)).max(1);
        }
        let state = Arc::new(tokio::sync::watch::Sender::new(Status::default()));
        let task = tokio::spawn(run(urls, config, state.clone()));
        Self { state, task }
    }

    /// The session up now, if any.
    pub fn session(&self) -> Option<Session> {
        self.state.borrow().session.clone()
    }

    /// Waits for a session to be up, and returns it; `None` once closed.
    pub async fn connected(&self) -> Option<Session> {
        let mut status = self.state.subscribe();
        let status = status
            .wait_for(|status| status.session.is_some() || status.closed)
            .await
            .ok()?;
        status.session.clone()
    }

    /// How many sessions were established so far (the first one included).
    pub fn connects(&self) -> u64 {
        self.state.borrow().connects
    }

    /// Closes the session and stops reconnecting.
    pub fn close(&self) {
        self.task.abort();
        self.state.send_modify(|status| {
            if let Some(session) = status.session.take() {
                session.close(Error::Cancel);
            }
            status.closed = true;
        });
    }
}

impl Drop for Reconnect {
    fn drop(&mut self) {
        self.close();
    }
}

/// Keeps a session up until the task is aborted.
async fn run(
    urls: Vec<String>,
    config: ClientConfig,
    state: Arc<tokio::sync::watch::Sender<Status>>,
) {
    let mut backoff = Backoff::new(random());
    let mut next = 0;
    // After a GOAWAY: the URL it named, tried first.
    let mut named: Option<String> = None;
    // The session that said GOAWAY, kept until the next one is up.
    let mut leaving: Option<Session> = None;
    loop {
        let url = named.take().unwrap_or_else(|| {
            let url = urls[next % urls.len()].clone();
            next += 1;
            url
        });
        let redacted = moq_net::redact::redact(&url).into_owned();
        tracing::debug!(url = %redacted, "connecting");
        let session = match crate::connect(&url, config.clone()).await {
            Ok(session) => session,
            Err(error) => {
                let wait = backoff.failed();
                tracing::info!(url = %redacted, %error, ?wait, "connecting failed; trying again");
                if leaving.as_ref().is_some_and(Session::is_closed) {
                    leaving = None;
                }
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        let up = Instant::now();
        tracing::info!(url = %redacted, version = %session.version(), "connected");
        state.send_modify(|status| {
            status.session = Some(session.clone());
            status.connects += 1;
        });
        // The new session is up: the one that said GOAWAY goes once the new one has had
        // time to take over what it carried (the relay closes it at the end of its drain
        // anyway): groups still arriving on it are not cut off.
        if let Some(old) = leaving.take() {
            tokio::spawn(async move {
                let _ = tokio::time::timeout(OVERLAP, old.closed()).await;
                old.close(Error::Cancel);
            });
        }
        match session.going_away().await {
            Ok(uri) => {
                tracing::info!(url = %redacted, to = %moq_net::redact::redact(&uri), "the relay is going away; moving");
                if !uri.is_empty() {
                    named = Some(uri);
                }
                leaving = Some(session);
                backoff.reset();
            }
            Err(error) => {
                let wait = backoff.ended(up.elapsed());
                tracing::info!(url = %redacted, %error, ?wait, "the session ended; reconnecting");
                state.send_modify(|status| status.session = None);
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// How long a session that said GOAWAY is kept once its replacement is up.
const OVERLAP: std::time::Duration = std::time::Duration::from_secs(2);

/// 64 random bits from std's per-process hasher keys (no RNG dependency for a seed).
fn random() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64),
    );
    hasher.finish()
}
