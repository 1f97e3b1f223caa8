//! # moqx-tokio: MoQ on tokio
//!
//! This crate **is** the tokio driver: it runs `moqx_net` session machines over real QUIC
//! connections, each UDP socket served by an endpoint task that moves datagrams between
//! the socket (GSO sends, GRO receives) and `moqx_runtime`'s socketless
//! [`Endpoint`](moqx_runtime::endpoint::Endpoint), in one of two modes:
//!
//! - **work-stealing** ([`Server::bind`]): one socket, sessions on tokio's pool
//!   ([`TokioRuntime`]);
//! - **thread per core** ([`Server::bind_per_core`]): a pinned current-thread runtime per
//!   core, each with its own `SO_REUSEPORT` socket on the shared port and the connections
//!   the kernel steers to it.
//!
//! Either way [`Server`] listens on one UDP port for both moq-lite bindings (chosen by
//! ALPN: a moq-lite version (`moq-lite-05`, `-04`, `-03`) is raw QUIC, `h3` is WebTransport) and yields a [`Request`] per
//! client, with its binding and (WebTransport) path, to accept or reject; [`connect`]
//! opens a client session to `moqt://host:port/path` (raw QUIC, the path in SETUP) or
//! `https://host:port/path` (WebTransport, the path in the CONNECT); [`Reconnect`] keeps
//! a client session up across a list of relays, their GOAWAYs and lost connections.
//!
//! Where UDP is blocked or WebTransport broken, moq-lite runs over QMux (`moqx_qmux`) on
//! TCP: [`connect`] also takes `ws://`, `wss://` (a WebSocket), `tls://` and `tcp://`;
//! [`QmuxListener`] serves any of them on a TCP port, and [`WebSocketUpgrade`] and
//! [`accept_tls`] let an HTTP server of the application's own (the relay's web port)
//! serve WebSocket and TLS clients beside its pages.
//!
//! It **is not** the protocol, nor the binding policy: every byte of moq-lite is
//! `moqx_net`'s; the QUIC configuration, the dispatch by ALPN, the WebTransport handshake,
//! the URL rules and the close codes are `moqx_runtime`'s. This crate only moves bytes,
//! time and tasks.

mod client;
mod driver;
mod qmux;
mod reconnect;
mod runtime;
mod server;

pub use client::connect;
pub use moqx_runtime::admission::Admission;
pub use moqx_runtime::binding::Binding;
pub use moqx_runtime::cid::MAX_WORKERS;
pub use moqx_runtime::client::ClientConfig;
/// Why a client or server could not start or connect (shared by every socket driver).
pub use moqx_runtime::driver::DriverError as Error;
pub use moqx_runtime::quiche_config::QuicLimits;
pub use moqx_runtime::server::ServerConfig;
pub use qmux::{QmuxListener, QmuxServerConfig, UpgradeRefused, WebSocketUpgrade, accept_tls};
pub use reconnect::Reconnect;
pub use runtime::{TokioDeadline, TokioRuntime};
pub use server::{Request, Server};
