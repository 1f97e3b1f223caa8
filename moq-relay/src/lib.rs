//! # moqx-relay: a MoQ relay
//!
//! This crate **is** the relay that fans moq-lite broadcasts out between sessions: one UDP
//! port for raw QUIC and WebTransport and the same TCP port for WebSocket clients
//! (moq-lite over QMux, for browsers without WebTransport), one shared [`Origin`](moqx_net::model::Origin) that
//! every session publishes into and subscribes from (upstream subscriptions shared by all
//! downstream subscribers of a track, cancelled a moment after the last one leaves), token
//! [`auth`] scoping what each session may publish and subscribe to, Prometheus
//! [`metrics`] over HTTP (with `/health`, `/ready` and an optional listener of its own for
//! operators), a graceful stop (GOAWAY, drain, exit), and what changes while it runs: a
//! [`RelayHandle`] reloads the configuration's reloadable parts ([`reload`]), and renewed
//! certificates and token keys are followed as their files (or URL) change.
//!
//! It **is not** the protocol (that is `moqx_net`) nor a socket driver: it is the policy
//! around them, over any driver that implements [`driver::Listener`] (`moqx_tokio`,
//! work-stealing or thread per core, and `moqx_uring`, chosen by `[server] driver`). The `moqx-relay` binary is a thin command
//! line over [`Relay`]; an application can run one in-process the same way:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = moqx_relay::Config::default();
//! let relay = moqx_relay::Relay::bind(&config).await?;
//! println!("relay on {}, certificate {}", relay.local_addr(), relay.fingerprint());
//! relay.run(async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```

/// Token authorization (the `moqx-auth` crate, re-exported under the name the relay
/// has always given it).
pub use moqx_auth as auth;
mod certificate_watch;
pub mod cluster;
pub mod config;
pub mod driver;
mod file_watch;
pub mod gatekeeper;
mod http;
mod jwks_fetch;
mod key_source;
pub mod metrics;
mod per_address;
mod policy;
mod process_metrics;
mod relay;
pub mod reload;
mod tcp_qmux;
mod web_qmux;

pub use config::Config;
pub use relay::{DriverFailed, Relay, RelayError};
pub use reload::{RelayHandle, ReloadError, Reloaded};
