//! Whole sessions in the test runtime: publisher → relay → subscribers, in virtual time.
//!
//! Each test runs with a seed (`MOQ_TEST_SEED` replays one) and names it in the failure message.

#[path = "../common/mod.rs"]
mod common;

mod bad_peers;
mod delivery;
mod faults;
mod requests;
mod sessions;
