//! # moq-bench: the measurement suite
//!
//! This crate **is** the load generator and the measurement behind every performance
//! figure of this project: client sessions in rooms ([`load`]) drive a relay process
//! ([`relay`]) with chat, media or fanout load at a fixed offered rate; the relay is
//! measured from `/proc` (CPU per delivered message, context switches, resident memory per
//! connection) and, where it serves `/metrics` and perf is there, by its [`io`] (system
//! calls, datagrams per send and per receive), every delivery is timed end to end, and the results are [`record`]s (a
//! table row and a JSON line each), compared pair by pair with [`stats`], and drawn by
//! [`chart`]. A [`soak`] runs chat load with churn for many minutes and checks that the
//! relay loses nothing and does not grow. [`cluster`] measures how long a network of
//! relays takes to carry on when one is killed or drained.
//!
//! It speaks plain moq-lite-05 through `moqx-tokio`, so it can drive any moq-lite relay.
//! It **is not** a test: it asserts nothing about speed, it prints figures.

pub mod ablation;
pub mod chart;
pub mod cluster;
mod heard;
pub mod io;
pub mod load;
pub mod media_soak;
mod patience;
pub mod record;
pub mod relay;
pub mod soak;
pub mod stats;
