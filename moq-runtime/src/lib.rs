//! # moq-runtime: what every socket-owning MoQ driver shares
//!
//! This crate **is** the driver-independent machinery between `moq-net`'s sans-IO sessions
//! and a real network: today the [`cid`] codec that lets a multi-worker endpoint steer
//! every packet to the worker that owns its connection, the [`timer`] wheel that keeps
//! thousands of connection timeouts behind one park deadline, [`udp`] sockets with GSO
//! sends and GRO receives (each switchable, to measure them), [`tls`] certificates
//! (PEM files, or self-signed at start with a fingerprint to pin), the [`quic`] adapter
//! that runs `moq_net` sessions over a quiche connection (raw QUIC), [`webtransport`] over
//! HTTP/3 on the same connections (the browser binding), one [`binding`] type over both,
//! and the socketless [`endpoint`]: the connection table of one UDP port, accepting with
//! connection IDs of our own under an [`admission`] policy (caps on connections, handshakes
//! and per address; QUIC Retry) and batching sends across connections.
//!
//! It **is not** a driver: it spawns nothing, owns no event loop and depends on no async
//! runtime. `moq-tokio` and `moq-uring` build their loops out of these parts.

pub mod admission;
pub mod binding;
pub mod cid;
pub mod endpoint;
pub mod quic;
pub mod timer;
pub mod tls;
pub mod udp;
pub mod webtransport;
