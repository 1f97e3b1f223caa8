//! One outbound peer link, kept up: dial, hold the session until it ends, wait (jittered
//! backoff), dial again, until the relay stops.

use std::sync::Arc;
use std::time::Instant;

use moqx_net::backoff::Backoff;
use moqx_runtime::client::ClientConfig;

use super::{OutboundPeer, lock};

/// Keeps `peer` linked with `client` until `stopping` turns true.
pub(super) async fn supervise(
    peer: Arc<OutboundPeer>,
    client: ClientConfig,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let mut backoff = Backoff::new(seed());
    let url = &peer.url;
    loop {
        if *stopping.borrow() {
            return;
        }
        {
            let mut state = lock(&peer.state);
            state.dialing = true;
            state.since = Some(Instant::now());
        }
        tracing::debug!(peer = %url.display, "dialing a cluster peer");
        let dialed = tokio::select! {
            dialed = moqx_tokio::connect(&url.dial, client.clone()) => dialed,
            _ = stopping.wait_for(|stop| *stop) => return,
        };
        let wait = match dialed {
            Ok(session) => {
                let up = Instant::now();
                tracing::info!(
                    peer = %url.display,
                    version = %session.version(),
                    "cluster peer linked"
                );
                {
                    let mut state = lock(&peer.state);
                    state.session = Some(session.clone());
                    state.dialing = false;
                    state.since = Some(up);
                    state.connects += 1;
                }
                // A drain does not cut the link here: the relay sent GOAWAY, and the
                // drain closes the session at its deadline.
                let error = match (session.closed().await, session.transport_closed()) {
                    (error, Some(words)) => format!("{error}: {words}"),
                    (error, None) => error.to_string(),
                };
                let lived = up.elapsed();
                tracing::warn!(
                    peer = %url.display,
                    %error,
                    lived = ?lived,
                    "cluster peer link ended"
                );
                let mut state = lock(&peer.state);
                state.session = None;
                state.failures += 1;
                state.last_error = Some(error);
                state.since = Some(Instant::now());
                backoff.ended(lived)
            }
            Err(error) => {
                let error = moqx_net::redact::redact(&error.to_string()).into_owned();
                tracing::warn!(peer = %url.display, %error, "dialing a cluster peer failed");
                let mut state = lock(&peer.state);
                state.dialing = false;
                state.failures += 1;
                state.last_error = Some(error);
                state.since = Some(Instant::now());
                backoff.failed()
            }
        };
        tracing::debug!(peer = %url.display, ?wait, "redialing after a wait");
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stopping.wait_for(|stop| *stop) => return,
        }
    }
}

/// A seed for one dialer's jitter, so that relays restarted together spread their dials.
fn seed() -> u64 {
    use ring::rand::{SecureRandom, SystemRandom};
    let mut bytes = [0u8; 8];
    // Any value works if the system's generator fails: the jitter is only a spread.
    let _ = SystemRandom::new().fill(&mut bytes);
    u64::from_le_bytes(bytes)
}
