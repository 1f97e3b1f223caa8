//! The hostile-peer suite's tests, one module per kind of hostile peer. Each test file
//! that runs the suite defines `DRIVER` (the relay driver it runs on), then declares this
//! module: `hostile_peers.rs` (tokio work-stealing), `hostile_peers_per_core.rs` (tokio
//! thread per core) and `hostile_peers_uring.rs` (io_uring).

mod announces;
mod bed;
mod connections;
mod groups;
mod moq_transport;
mod raw;
