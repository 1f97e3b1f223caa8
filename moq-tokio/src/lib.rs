//! # moq-tokio: MoQ on tokio
//!
//! This crate **is** the tokio driver: it runs `moq_net` session machines on tokio's
//! work-stealing pool ([`TokioRuntime`]) over real QUIC connections, each UDP port served
//! by one endpoint task that moves datagrams between the socket (GSO sends, GRO receives)
//! and `moq_runtime`'s socketless [`Endpoint`](moq_runtime::endpoint::Endpoint).
//!
//! - [`Server::bind`] listens on a UDP port and yields sessions;
//! - [`connect`] opens a client session to `moqt://host:port/path` (raw QUIC, ALPN
//!   `moq-lite-05`, the path in SETUP).
//!
//! It **is not** the protocol: every byte of moq-lite is `moq_net`'s; this crate only moves
//! bytes, time and tasks. WebTransport URLs (`https://`) are not served yet.

mod client;
mod driver;
mod error;
mod quic_config;
mod runtime;
mod server;

pub use client::{ClientConfig, connect};
pub use error::Error;
pub use runtime::{TokioDeadline, TokioRuntime};
pub use server::{Server, ServerConfig};
