//! QMux clients on plain TCP (`tcp://`, `[server] tcp_bind`): moq-lite with no
//! encryption and no certificate, for trusted networks only (a sidecar on the same host,
//! a private network between relays). Off unless configured.
//!
//! The listener (`moqx_tokio::QmuxListener`) negotiates the version in band; each client
//! then takes a place among its address's (`limits.max_sessions_per_address`) and goes
//! through the same [`Gatekeeper`] as every other: its path and token arrive in SETUP,
//! the same limits count it, and `/metrics` shows it under the binding `tcp`.

use std::sync::Arc;

use moqx_tokio::QmuxListener;

use crate::gatekeeper::Gatekeeper;
use crate::per_address::{PerAddress, session_slot};

/// Admits the clients of `listener` until it fails (or the task is aborted, at shutdown).
pub(crate) async fn serve(
    mut listener: QmuxListener,
    gatekeeper: Arc<Gatekeeper>,
    max_per_address: usize,
) {
    let per_address = Arc::new(PerAddress::default());
    while let Some(request) = listener.accept().await {
        let slot = match request.remote_addr() {
            Some(peer) => session_slot(&per_address, peer, max_per_address),
            None => Some(None),
        };
        let Some(slot) = slot else {
            request.reject(
                moqx_runtime::webtransport::StatusCode::SERVICE_UNAVAILABLE,
                moqx_net::Error::Cancel,
            );
            continue;
        };
        if let Some(watch) = gatekeeper.admit(request) {
            tokio::spawn(async move {
                watch.await;
                drop(slot);
            });
        }
    }
    tracing::warn!("the plain-TCP listener stopped");
}
