//! A peer as strict as a deployed moq-lite-05 relay, built by hand on quiche: what every
//! client role this workspace ships is tested against (`tests/tests/strict_peer.rs`), and
//! what `moq-bench` profiles can run through (`strict-relay`, a binary of this crate).
//!
//! Our own relay forgives what deployed relays do not, so a test against ourselves cannot
//! catch an interop failure. This peer shares no protocol code with `moqx-net`: its
//! [`wire`] layer is written from `shared/spec/moq-lite-05.md`, and its [`relay`] applies
//! the rules the spec lists as fatal in a deployed relay (its announce stream to each
//! client must never fail) and reports everything else a client gets wrong.

pub mod relay;
pub mod wire;

pub use relay::{Config, Report, RunningRelay, StrictRelay, deployed_limits};
