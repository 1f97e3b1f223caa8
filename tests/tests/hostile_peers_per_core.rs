//! The hostile-peer suite (`hostile/`, described in `hostile_peers.rs`) on the
//! relay's tokio thread-per-core driver, two workers.
#![allow(missing_docs)]

/// The relay driver every test of this file runs on.
const DRIVER: moqx_relay::config::Driver = moqx_relay::config::Driver::TokioPerCore;

mod hostile;
