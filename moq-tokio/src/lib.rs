//! # moq-tokio: MoQ on tokio
//!
//! This crate **is** the tokio driver: it runs `moq_net` session machines on tokio's
//! work-stealing pool ([`TokioRuntime`]) over real QUIC connections, each UDP port served
//! by one endpoint task that moves datagrams between the socket (GSO sends, GRO receives)
//! and `moq_runtime`'s socketless [`Endpoint`](moq_runtime::endpoint::Endpoint).
//!
//! - [`Server::bind`] listens on one UDP port for both moq-lite bindings (chosen by ALPN:
//!   `moq-lite-05` is raw QUIC, `h3` is WebTransport) and yields a [`Request`] per client,
//!   with its binding and (WebTransport) path, to accept or reject;
//! - [`connect`] opens a client session to `moqt://host:port/path` (raw QUIC, the path in
//!   SETUP) or `https://host:port/path` (WebTransport, the path in the CONNECT).
//!
//! It **is not** the protocol: every byte of moq-lite is `moq_net`'s; this crate only moves
//! bytes, time and tasks; the HTTP/3 and WebTransport framing is `moq_runtime`'s.

mod client;
mod driver;
mod error;
mod poll;
mod quic_config;
mod runtime;
mod server;

pub use client::{ClientConfig, connect};
pub use error::Error;
pub use moq_runtime::admission::Admission;
pub use runtime::{TokioDeadline, TokioRuntime};
pub use server::{Binding, Request, Server, ServerConfig};
