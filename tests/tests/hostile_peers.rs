//! The hostile-peer suite: a real relay (`moqx_relay::Relay`, in process, on loopback) with a
//! well-behaved publisher and subscriber delivering through it, and beside them a raw
//! client doing one thing a hostile peer does. Each test checks that the relay refuses the
//! hostile client with the right code, that what it holds stays within its configured
//! bound (read from its `/metrics`), and that the good pair keeps delivering.
//!
//! This file runs it on the tokio driver (work-stealing); the same tests run thread per
//! core and on io_uring from `hostile_peers_per_core.rs` and `hostile_peers_uring.rs`.
#![allow(missing_docs)]

/// The relay driver every test of this file runs on.
const DRIVER: moqx_relay::config::Driver = moqx_relay::config::Driver::Tokio;

mod hostile;
