//! # moqx-runtime: what every socket-owning MoQ driver shares
//!
//! This crate **is** the driver-independent machinery between `moqx-net`'s sans-IO sessions
//! and a real network, as code a driver calls:
//!
//! - **the binding layer**: [`quiche_config`] (the QUIC parameters, TLS from memory),
//!   [`server`] (ALPN dispatch, the WebTransport handshake with its deadline, the version
//!   choice, requests to accept or refuse, the refusal linger), [`client`] (URL → what to
//!   connect to, the certificate pin, the CONNECT), one [`binding`] type over raw QUIC and
//!   [`webtransport`], and the named HTTP/3 close codes;
//! - **the connection table**: the socketless [`endpoint`] of one UDP port, accepting with
//!   connection IDs of our own ([`cid`]) under an [`admission`] policy shared by a server's
//!   workers (caps on connections, handshakes and per address; QUIC Retry), batching sends
//!   across connections, with the [`timer`] wheel behind one park deadline; the [`quic`]
//!   adapter that runs `moqx_net` sessions over a quiche connection (moq-lite's stream
//!   order mapped to quiche's urgencies);
//! - **the platform**: [`udp`] sockets with GSO sends and GRO receives (each switchable, to
//!   measure them), the `steering` program (Linux) that keeps every packet on the worker owning
//!   its connection, pinning workers to [`cores`], and [`tls`] certificates (PEM files, or
//!   self-signed at start with a fingerprint to pin).
//!
//! It **is not** a driver: it spawns nothing, owns no event loop and depends on no async
//! runtime. `moqx-tokio` and `moqx-uring` build their loops out of these parts: a
//! driver's turn is this, with its own way of waiting for the socket and the timer.
//!
//! ```no_run
//! # fn turn<R>(socket: &std::net::UdpSocket, endpoint: &mut moqx_runtime::endpoint::Endpoint,
//! #     acceptor: &moqx_runtime::server::Acceptor, runtime: &R)
//! # where R: moqx_net::runtime::Runtime<Transport = moqx_runtime::binding::BindingSession> {
//! use std::time::Instant;
//! use moqx_runtime::server::Admitted;
//!
//! let mut buffer = [0u8; 65_536];
//! let mut transmits = Vec::new();
//! // Datagrams in (until the socket would block), due timers, everything out.
//! while let Ok((len, from)) = socket.recv_from(&mut buffer) {
//!     let _ = endpoint.handle_datagram(&mut buffer[..len], from, None, Instant::now());
//! }
//! endpoint.handle_timeouts(Instant::now());
//! endpoint.poll_transmits(Instant::now(), &mut transmits);
//! for transmit in &transmits {
//!     for datagram in transmit.contents.chunks(transmit.segment_size) {
//!         let _ = socket.send_to(datagram, transmit.destination);
//!     }
//! }
//! endpoint.reclaim(transmits.drain(..));
//! // Established connections become requests for the application to accept or refuse.
//! while let Some(connection) = endpoint.accept() {
//!     match acceptor.admit(runtime, connection) {
//!         Admitted::Request(request) => drop(request.accept()),
//!         // A WebTransport client's CONNECT: a future to spawn, resolving with its request.
//!         Admitted::Handshake(handshaking) => drop(handshaking),
//!         Admitted::Refused => {}
//!     }
//! }
//! // Then wait for the socket, a connection's flush (`Endpoint::set_waker`) or
//! // `endpoint.next_timeout()`.
//! # }
//! ```

pub mod admission;
pub mod binding;
pub mod certificates;
pub mod cid;
pub mod client;
pub mod cores;
pub mod deadlines;
pub mod driver;
pub mod endpoint;
pub mod qmux;
pub mod quic;
pub mod quic_trace;
pub mod quiche_config;
pub mod reset;
pub mod server;
#[cfg(target_os = "linux")]
pub mod steering;
pub mod tcp_tls;
pub mod timer;
pub mod tls;
pub mod udp;
mod urgency;
pub mod webtransport;
