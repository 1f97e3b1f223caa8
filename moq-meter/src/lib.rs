//! # moq-meter: the deterministic cost meter
//!
//! This crate **is** a relay and its clients in one process, over quiche and the real
//! session machines, datagrams passed in memory: the `moqx-relay` server configuration
//! (its endpoint, its acceptor, one origin for every session), members that each have an
//! endpoint of their own, and a [`Network`](network::Network) that hands each datagram to
//! its destination at once. Under callgrind it counts the relay's **instructions per
//! delivery**: only [`Relay::relay_turn_measured`](relay::Relay::relay_turn_measured)
//! counts (`--toggle-collect`), and only after the warm-up
//! ([`measurement_starts`], `--zero-before`); the members' work never does. The count is
//! split by crate and by function ([`callgrind`]).
//!
//! It **is not** a load generator for a relay on a network (`moq-bench` is), and its
//! wall-clock figures are indicative only: each message is delivered before the next is
//! published, so a turn holds what one message causes, as a chat at a low rate per member
//! sees it. It needs no valgrind to run (`moq-meter run`), only to count
//! (`moq-meter count`).
//!
//! ```text
//! members' turns ─▶ network ─▶ relay_turn_measured ─▶ network ─▶ members' turns …
//! ```
//!
//! quiche reads the clock itself, so time is the machine's: a turn reads it once, as a
//! driver's does, and no timer needs to fire for a message to arrive. Two counts of one
//! build agree within 1 % (BENCHMARKS.md, "The cost meter").

pub mod callgrind;
pub mod host;
pub mod local;
pub mod members;
pub mod meter;
pub mod network;
pub mod relay;
pub mod workload;

use members::Transport;
use meter::{Measured, Meter};
use workload::Workload;

/// Why a run could not measure.
#[derive(Debug, thiserror::Error)]
pub enum MeterError {
    /// The workload is not well formed (names the parameter).
    #[error("the workload: {0}")]
    Workload(String),
    /// The relay could not start.
    #[error(transparent)]
    Relay(#[from] relay::RelayError),
    /// A member's endpoint or connection could not be made.
    #[error("a member's endpoint: {0}")]
    Endpoint(#[from] moqx_runtime::endpoint::EndpointError),
    /// A member's connection could not be made.
    #[error("a member's connection: {0}")]
    Client(#[from] moqx_runtime::client::ConnectError),
    /// A member could not connect.
    #[error("a member could not connect: {0}")]
    Connect(String),
    /// A member's broadcast could not be published in its own origin.
    #[error("publishing {0}: {1}")]
    Publish(String, String),
    /// A phase never finished: a message lost, or a set-up that never completed.
    #[error("{phase} stalled: {received} of {expected} frames read, and nothing moves")]
    Stalled {
        /// What was being done.
        phase: String,
        /// Frames read by every member.
        received: u64,
        /// Frames they should have read.
        expected: u64,
    },
    /// More frames were read than published to the readers.
    #[error("{received} frames read where {expected} were published to the readers")]
    Duplicated {
        /// Frames read by every member.
        received: u64,
        /// Frames they should have read.
        expected: u64,
    },
}

/// Sets up `workload` with its members on `transport`, delivers `warm` messages, then
/// `messages` more after [`measurement_starts`]; returns what the measured part delivered.
pub fn run(
    workload: Workload,
    transport: Transport,
    warm: u64,
    messages: u64,
) -> Result<Measured, MeterError> {
    let mut meter = Meter::new(workload, transport)?;
    meter.set_up()?;
    tracing::debug!(sessions = meter.relay_sessions(), "set up");
    meter.deliver(warm)?;
    measurement_starts();
    meter.deliver(messages)
}

/// Marks where the measured part starts: callgrind zeroes its counts on entering it
/// (`--zero-before`). Never inlined, so that it stays a function of its own name.
#[inline(never)]
pub fn measurement_starts() {
    std::hint::black_box("the measured part starts");
}
