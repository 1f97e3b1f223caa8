//! # moqx-tokio: MoQ on tokio
//!
//! This crate **is** the tokio driver: it runs `moqx_net` session machines over real QUIC
//! connections, each UDP socket served by an endpoint task that moves datagrams between
//! the socket (GSO sends, GRO receives) and `moqx_runtime`'s socketless
//! [`Endpoint`](moqx_runtime::endpoint::Endpoint), in one of two modes:
//!
//! - **work-stealing** ([`Server::bind`]): one socket, sessions on tokio's pool
//!   ([`TokioRuntime`]);
//! - **thread per core** (`Server::bind_per_core`, Linux): a pinned current-thread runtime per
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
//! It re-exports what a program needs from the crates below it (the [`model`], the
//! session types, [`Certificate`] and [`Fingerprint`], and `moqx_net` whole as [`net`]),
//! so that it is the one dependency:
//!
//! ```no_run
//! use moqx_tokio::model::{BroadcastProducer, Origin, Track};
//! use moqx_tokio::{Certificate, Client, Server, ServerConfig, SessionConfig};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! // A relay on a port: every session shares one origin.
//! let certificate = Certificate::self_signed(&["localhost".into()])?;
//! let fingerprint = certificate.fingerprint();
//! let relay = SessionConfig::relay(&Origin::new());
//! let server = Server::bind(ServerConfig::new("[::]:4443".parse()?, certificate, relay)).await?;
//! server.accept_all();
//!
//! // A client publishing a track to it.
//! let (origin, broadcast) = (Origin::new(), BroadcastProducer::new());
//! let mut track = broadcast.create_track(Track::new("chat"));
//! origin.publish("room/alice", &broadcast)?;
//! let client = Client::new().with_fingerprint(fingerprint).with_publisher(&origin);
//! let session = client.connect("moqt://localhost:4443/room").await?;
//! track.used().await;
//! track.write_group(0, "hello");
//! # drop(session);
//! # Ok(())
//! # }
//! ```
//!
//! It **is not** the protocol, nor the binding policy: every byte of moq-lite is
//! `moqx_net`'s; the QUIC configuration, the dispatch by ALPN, the WebTransport handshake,
//! the URL rules and the close codes are `moqx_runtime`'s. This crate only moves bytes,
//! time and tasks.

mod client;
mod driver;
#[cfg(target_os = "linux")]
mod per_core;
mod qmux;
mod reconnect;
mod runtime;
mod server;
mod serving;
mod worker;

pub use client::{Client, connect, connect_transport};
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

// What a program embedding MoQ needs, from the crates below this one: with these, one
// dependency is enough.
pub use moqx_net as net;
pub use moqx_net::coding::Version;
pub use moqx_net::model;
pub use moqx_net::session::{Authorize, Origins, Session, SessionConfig};
pub use moqx_runtime::tls::{Certificate, Fingerprint};
pub use moqx_runtime::udp::UdpConfig;
pub use runtime::{TokioDeadline, TokioRuntime};
pub use server::{Request, Server};
pub use worker::Worker;
