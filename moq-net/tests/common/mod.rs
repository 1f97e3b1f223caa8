//! What the virtual-time test files share: where virtual time starts, and a relay with
//! its clients.

// Each test file uses part of it.
#![allow(dead_code)]

pub(crate) mod moqt;
pub(crate) mod relay;

use std::time::Instant;

use moqx_net::runtime::test::TestRuntime;

/// Where virtual time starts: the test harness, like a driver, reads the clock once (the
/// core itself never does).
#[allow(clippy::disallowed_methods)]
pub(crate) fn epoch() -> Instant {
    Instant::now()
}

/// [`moqx_net::runtime::test::seeded`], with virtual time starting now.
pub(crate) fn seeded(default_seed: u64, test: impl FnOnce(&TestRuntime)) {
    moqx_net::runtime::test::seeded(default_seed, epoch(), test);
}
