//! # moqx-net: the sans-IO core of MoQ
//!
//! This crate **is** the part of a Media-over-QUIC implementation that does not depend on
//! how bytes, time or tasks move:
//!
//! | module | what it holds |
//! |---|---|
//! | [`model`] | the pub/sub model: an [`Origin`](model::Origin) of broadcasts → tracks → groups → frames, shared by every session of a relay on every core |
//! | [`coding`] | the moq-lite wire codec (-03, -04, -05, -06-wip), byte for byte as deployed peers speak it, and the protocol [`Version`](coding::Version) a session speaks |
//! | [`moqt`] | the IETF moq-transport wire codec (drafts 14, 16, 18), beside moq-lite's |
//! | [`session`] | the protocol machines, moq-lite and moq-transport: a publisher half serving an origin, a subscriber half filling one |
//! | [`transport`] | the poll-based traits a QUIC (or WebTransport) connection implements for a session |
//! | [`backoff`] | when to try a connection again (exponential, jittered), for clients and relays that redial |
//! | [`runtime`] | the [`Runtime`](runtime::Runtime) boundary (time, timers, running a machine), and with feature `test-runtime` a deterministic virtual-time runtime with an in-memory transport |
//! | `sim` (feature `test-runtime`) | whole topologies of relays and clients in virtual time, with partitions and seeded faults: the kit this project's own scenario tests use, for testing an application the same way |
//!
//! and the [`Error`] taxonomy with its one mapping to wire codes.
//!
//! It **is not** a network stack: it owns no sockets, reads no clock of its own and keeps no
//! global state. Driver crates (`moqx-tokio`, `moqx-uring`, `moqx-wasm`) implement
//! [`transport`] over real connections and [`runtime::Runtime`] over their executors.
//!
//! # A session, driven
//!
//! A driver hands [`session::connect`] (or [`session::accept`]) its runtime and a transport,
//! and gets a [`session::Session`] handle; the runtime runs the machine. Here the test
//! runtime plays the driver: a publisher and a subscriber meet over an in-memory link, in
//! virtual time.
//!
//! ```
//! use std::time::Duration;
//! use moqx_net::model::{BroadcastProducer, Origin, Track};
//! use moqx_net::runtime::test::{LinkConfig, TestRuntime};
//! use moqx_net::session::{self, SessionConfig};
//!
//! let runtime = TestRuntime::new(1, std::time::Instant::now());
//! let (client, server) = runtime.connect(LinkConfig::default());
//!
//! // The server publishes a broadcast with one track.
//! let published = Origin::new();
//! let broadcast = BroadcastProducer::new();
//! let mut track = broadcast.create_track(Track::new("clock"));
//! published.publish("time", &broadcast).unwrap();
//! let _server = session::accept(runtime.clone(), server, SessionConfig::default().with_publisher(&published));
//!
//! // The client discovers it and subscribes.
//! let discovered = Origin::new();
//! let _client = session::connect(runtime.clone(), client, SessionConfig::default().with_subscriber(&discovered));
//! assert!(runtime.run_until(Duration::from_secs(1), || discovered.consume_broadcast("time").is_some()));
//! let remote = discovered.consume_broadcast("time").unwrap();
//! let reader = runtime.block_on(Duration::from_secs(1), async move {
//!     remote.subscribe_track("clock").await
//! });
//! let mut reader = reader.unwrap();
//!
//! let mut group = track.append_group();
//! group.write(0, "12:00:00");
//! group.finish();
//! let text = runtime.block_on(Duration::from_secs(1), async move {
//!     let mut group = reader.next_group().await.unwrap().unwrap();
//!     group.read_frame().await.unwrap().unwrap().payload
//! });
//! assert_eq!(text, "12:00:00");
//! ```

mod error;
mod id_map;

pub mod backoff;
pub mod coding;
pub mod model;
pub mod moqt;
pub mod reconnect;
pub mod redact;
pub mod runtime;
pub mod session;
#[cfg(any(test, feature = "test-runtime"))]
pub mod sim;
pub mod transport;

pub use error::Error;
