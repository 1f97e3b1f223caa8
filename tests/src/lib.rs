//! # moq-conformance: one scenario suite, every driver
//!
//! This crate **is** the conformance suite of DESIGN.md's "the same scenarios against
//! every driver": whole moq-lite sessions (publisher → relay → subscribers) written once
//! against the [`Harness`] trait, and run by `tests/` against each harness: the
//! virtual-time test runtime of `moqx_net`, and the tokio driver over real sockets on
//! loopback, on raw QUIC and on WebTransport. A driver that passes here behaves, on the
//! wire and in the model, like the others.
//!
//! It also holds the [`strict`] peer: a moq-lite-05 relay built by hand on quiche, as strict
//! as a deployed relay, that every client role we ship is run against
//! (`tests/strict_peer.rs`), and the `strict-relay` binary that `moq-bench` profiles can
//! run through.
//!
//! And the [`hostile`] client: raw quiche over a real socket, scripted to do what a hostile
//! peer does to a relay (oversized messages, floods, withheld credit, no SETUP at all), for
//! the hostile-peer suite (`tests/hostile_peers.rs`).
//!
//! And, with feature `browser`, the `browser` harness: the chat page of `moqx-wasm` in a
//! real headless Chromium against the relay (`tests/browser.rs`, and the page latency
//! benchmark `browser-latency`).
//!
//! And the [`impaired`] scenario: the same sessions through the `moq-impair` proxy (loss,
//! reordering, duplication, corruption, delay, a bottleneck), under each of its
//! conditions ([`impaired_tests!`]), on every real driver.
//!
//! It **is not** a place for driver-specific tests (those live beside each driver) nor
//! for scripted faults inside a session, which only the test runtime can script.
//!
//! To add a driver: implement [`Harness`] for it and invoke [`conformance_tests!`] in a
//! test file.

#[cfg(feature = "browser")]
pub mod browser;
pub mod hostile;
pub mod impaired;
pub mod scenarios;
pub mod strict;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use moqx_net::session::{Session, SessionConfig};

/// A task a scenario runs beside its sessions (a reader of a track).
pub type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What a scenario needs from a driver: connect sessions, run them, run tasks.
pub trait Harness {
    /// Connects a client configured with `client` to a server configured with `server`;
    /// returns (the client's session, the server's session) once both exist.
    fn connect(&mut self, server: SessionConfig, client: SessionConfig) -> (Session, Session);

    /// Runs sessions and tasks until `done` returns true; false if it did not within
    /// `patience` (virtual time in the test runtime; real drivers wait at least 10 s of
    /// real time, a bound against hangs, not a performance threshold).
    fn run_until(&mut self, patience: Duration, done: &mut dyn FnMut() -> bool) -> bool;

    /// Runs `task` beside the sessions.
    fn spawn(&mut self, task: Task);

    /// UDP sends the servers' kernel refused so far (their datagrams lost); 0 for a
    /// harness that sends no UDP. Scenarios that send large bursts assert it stays 0.
    fn send_errors(&self) -> u64;
}

/// The versions a harness's server accepts for a client speaking `client`: every one,
/// the client's first. A draft-14 WebTransport client names no protocol and gets the
/// first of the server's versions that may come unnamed, so the server prefers the
/// client's; a client offering one version makes the order moot otherwise.
pub fn server_versions(client: moqx_net::coding::Version) -> Vec<moqx_net::coding::Version> {
    let mut versions = vec![client];
    versions.extend(
        moqx_net::coding::Version::ALL
            .iter()
            .copied()
            .filter(|version| *version != client),
    );
    versions
}

/// Generates one `#[test]` per pair of versions for [`scenarios::across_versions`]: every
/// pair of the released versions (-03, -04, -05) as publisher and subscriber, and -06-wip
/// with -05 and with itself, for the harness that `$harness` makes.
#[macro_export]
macro_rules! cross_version_tests {
    ($harness:expr) => {
        $crate::cross_version_tests!(@each $harness;
            lite03_to_lite03: Lite03, Lite03;
            lite03_to_lite04: Lite03, Lite04;
            lite03_to_lite05: Lite03, Lite05;
            lite04_to_lite03: Lite04, Lite03;
            lite04_to_lite04: Lite04, Lite04;
            lite04_to_lite05: Lite04, Lite05;
            lite05_to_lite03: Lite05, Lite03;
            lite05_to_lite04: Lite05, Lite04;
            lite05_to_lite05: Lite05, Lite05;
            lite05_to_lite06_wip: Lite05, Lite06Wip;
            lite06_wip_to_lite05: Lite06Wip, Lite05;
            lite06_wip_to_lite06_wip: Lite06Wip, Lite06Wip;
        );
    };
    (@each $harness:expr; $($name:ident: $publisher:ident, $subscriber:ident;)*) => {
        $(
            #[test]
            fn $name() {
                let mut harness = $harness;
                $crate::scenarios::across_versions(
                    &mut harness,
                    moqx_net::coding::Version::$publisher,
                    moqx_net::coding::Version::$subscriber,
                );
            }
        )*
    };
}

/// Generates one `#[test]` per pair of [`scenarios::across_versions`] that puts each
/// moq-transport draft (14, 16, 18) on the wire, as publisher and as subscriber, beside
/// moq-lite and beside another draft, for the harness that `$harness` makes. For the
/// harnesses whose binding carries moq-transport (raw QUIC, WebTransport, virtual time).
#[macro_export]
macro_rules! moq_transport_version_tests {
    ($harness:expr) => {
        $crate::cross_version_tests!(@each $harness;
            moqt14_to_lite05: Moqt14, Lite05;
            lite05_to_moqt16: Lite05, Moqt16;
            moqt18_to_moqt14: Moqt18, Moqt14;
            moqt16_to_moqt18: Moqt16, Moqt18;
        );
    };
}

/// Generates one `#[test]` per scenario of [`scenarios`] for the harness that
/// `$harness` (an expression, evaluated per test) makes.
#[macro_export]
macro_rules! conformance_tests {
    ($harness:expr) => {
        $crate::conformance_tests!(@each $harness;
            a_frame_flows_from_publisher_through_relay_to_subscriber,
            a_late_joiner_starts_at_the_latest_group,
            the_last_subscriber_leaving_cancels_upstream,
            a_dropped_publisher_track_ends_subscriptions_with_dropped,
            a_finished_publisher_track_ends_subscriptions_cleanly,
            a_publisher_disconnecting_unannounces_its_broadcasts,
            a_burst_of_groups_and_a_megabyte_frame_arrive_intact_and_in_order,
            many_subscribers_read_one_track_through_one_relay,
            a_close_code_reaches_the_peer,
        );
    };
    (@each $harness:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let mut harness = $harness;
                $crate::scenarios::$name(&mut harness);
            }
        )*
    };
}
