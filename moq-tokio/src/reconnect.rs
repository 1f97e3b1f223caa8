//! Clients that come back by themselves, on tokio: [`moqx_net::reconnect`]'s policy with
//! tokio's timers, dialing with [`connect`](crate::connect).
//!
//! [`Reconnect`] keeps a session up to one of a list of relay URLs: it dials again
//! whenever the session ends or the relay says it is going away (GOAWAY), moving to the
//! URL a GOAWAY names before it leaves the old session, and backs off between failures
//! (1 s doubling to 10 s, jittered). Every session is made from the same
//! [`ClientConfig`], so it serves the same publish origin and fills the same subscribe
//! origin: what the application publishes is announced on each new session, and what it
//! follows with [`Origin::follow_track`](moqx_net::model::Origin::follow_track) carries on
//! from its first missing group. The module docs of [`moqx_net::reconnect`] say the rest.
//!
//! The session's hop id (`session.origin_id`) is drawn once if unset: it is how relays
//! downstream recognise the same publisher on its new relay, and move its subscribers
//! along instead of ending their subscriptions.

use std::hash::{BuildHasher, Hasher};

use moqx_net::reconnect::hop_id;
use moqx_net::session::Session;
use moqx_runtime::client::ClientConfig;

use crate::runtime::TokioRuntime;

/// A session kept up across relays (see the module docs). Dropping it (or
/// [`close`](Self::close)) closes the session and stops reconnecting.
#[derive(Debug)]
pub struct Reconnect {
    inner: moqx_net::reconnect::Reconnect<Session>,
}

impl Reconnect {
    /// Starts keeping a session up to one of `urls` (tried in order, then round again)
    /// with `config`, on the current tokio runtime.
    ///
    /// # Panics
    ///
    /// If `urls` is empty, or outside a tokio runtime.
    pub fn new(urls: Vec<String>, mut config: ClientConfig) -> Self {
        if config.session.origin_id == 0 {
            config.session.origin_id = hop_id(random());
        }
        let (inner, task) = moqx_net::reconnect::Reconnect::new(
            TokioRuntime::current(),
            urls,
            random(),
            move |url: String| {
                let config = config.clone();
                async move { crate::connect(&url, config).await }
            },
        );
        tokio::spawn(task);
        Self { inner }
    }

    /// The session up now, if any.
    pub fn session(&self) -> Option<Session> {
        self.inner.session()
    }

    /// Waits for a session to be up, and returns it; `None` once closed.
    pub async fn connected(&self) -> Option<Session> {
        self.inner.connected().await
    }

    /// How many sessions were established so far (the first one included).
    pub fn connects(&self) -> u64 {
        self.inner.connects()
    }

    /// Closes the session and stops reconnecting.
    pub fn close(&self) {
        self.inner.close();
    }
}

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
