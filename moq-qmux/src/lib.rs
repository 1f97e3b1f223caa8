//! # moqx-qmux: QUIC's streams over one reliable byte stream, without I/O
//!
//! This crate **is** QMux (draft-ietf-quic-qmux, drafts 00 to 02) as a state machine: the
//! frames ([`frame`]), the transport parameters ([`params`]), the records a byte stream
//! carries ([`record`]), the drafts and the subprotocol names that negotiate them
//! ([`version`]) and which of them moq-lite picks ([`negotiation`]), and a [`Connection`] with streams, flow control, priorities, resets,
//! close and keep-alive, shared with a `moqx_net` session through [`QmuxSession`], which
//! implements `moqx_net::transport`. moq-lite runs over it unchanged when UDP is blocked or
//! WebTransport is broken (Safari): over a WebSocket, TLS or plain TCP.
//!
//! It **is not** a carrier: it owns no socket, no TLS, no WebSocket and no clock. A driver
//! (`moqx-tokio`, `moqx-wasm`) moves the bytes and the time:
//!
//! ```
//! use std::time::Duration;
//! use moqx_net::runtime::Instant;
//! use moqx_qmux::{Config, Connection, QmuxConnection, Side, Version};
//!
//! let now = Instant::now();
//! let client = QmuxConnection::new(Connection::new(Side::Client, Version::Draft01, Config::default(), vec![], now));
//! let server = QmuxConnection::new(Connection::new(Side::Server, Version::Draft01, Config::default(), vec![], now));
//! let waker = std::task::Waker::noop();
//! // A driver's loop: records out of one side go to the carrier (here, the other side)...
//! while let Some(record) = client.poll_transmit(waker) {
//!     server.handle_record(record, now);
//! }
//! while let Some(record) = server.poll_transmit(waker) {
//!     client.handle_record(record, now);
//! }
//! // ...and the timer is armed at `timeout()`, calling `on_timeout` when it fires.
//! assert!(client.timeout().unwrap() <= now + Duration::from_secs(30));
//! ```
//!
//! Peer bytes are never trusted: every record and frame is bounded (`max_record_size`,
//! stream and connection credit, the stream limit), and a breach closes the connection
//! with the transport error the draft names.

pub mod connection;
pub mod frame;
pub mod negotiation;
pub mod params;
pub mod record;
pub mod session;
pub mod version;

pub use connection::{Config, Connection, Side};
pub use params::TransportParameters;
pub use session::{QmuxConnection, QmuxRecvStream, QmuxSendStream, QmuxSession};
pub use version::Version;
