//! # moq-impair: a seeded impairment proxy for real packets
//!
//! A UDP forwarder for tests and benchmarks that does to packets what real networks do:
//! random and burst loss, reordering, duplication, corruption, delay with jitter, a
//! rate-limited bottleneck with a finite queue, an MTU that silently drops larger
//! packets (a PMTU black hole), a path that goes dark, and NAT rebinding. Put it
//! between a client and a server on loopback and both run their real stacks (quiche,
//! GSO, GRO, the kernel's sockets) through a bad network. Every random decision follows
//! from a seed, so a failure reproduces with the same seed.
//!
//! It **is** the packet-level half of the test story: the virtual-time link of
//! `moqx_net`'s test runtime scripts faults into whole sessions without sockets; this
//! proxy puts the same faults under real sockets. It **is not** an emulator of queues
//! and routers in general (one bottleneck per direction, tail drop), and it needs no
//! privileges: for what only the kernel can do (an interface MTU with Don't Fragment
//! errors, several addresses on one host), tests use a network namespace.
//!
//! ```no_run
//! use moq_impair::{Impairment, Proxy, ProxyConfig};
//!
//! let server = "127.0.0.1:4443".parse().unwrap();
//! let impairment: Impairment = "loss=1%,delay=50ms,jitter=5ms,rate=10mbit".parse().unwrap();
//! let proxy = Proxy::start(ProxyConfig::new(server, impairment, 42)).unwrap();
//! // Clients connect to proxy.local_addr() instead of the server.
//! # let _ = proxy.local_addr();
//! ```
//!
//! The `moq-impair` binary runs one from the command line (`moq-impair --help`).

mod impairment;
mod link;
mod proxy;

pub use impairment::{Impairment, ImpairmentError};
pub use link::{BACK_TO_BACK, BURST_SPAN, Bottleneck, Drop, Fate, Link};
pub use proxy::{DirectionStats, Proxy, ProxyConfig, ProxyStats};
