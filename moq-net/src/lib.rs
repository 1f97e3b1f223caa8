//! # moq-net: the sans-IO core of MoQ
//!
//! This crate **is** the part of a Media-over-QUIC implementation that does not depend on
//! how bytes, time or tasks move: the pub/sub [`model`] (an origin of broadcasts → tracks →
//! groups → frames, shared by every session of a relay on every core) and the [`Error`]
//! taxonomy with its wire codes. The moq-lite codec, the protocol state machines and the
//! `Runtime` boundary follow in the same crate.
//!
//! It **is not** a network stack: it owns no sockets, reads no clock of its own and keeps no
//! global state. Driver crates (`moq-tokio`, `moq-uring`, `moq-wasm`) move the bytes.

mod error;
mod id_map;

pub mod coding;
pub mod model;
pub mod runtime;
pub mod session;
pub mod transport;

pub use error::Error;
