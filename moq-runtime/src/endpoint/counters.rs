//! What an endpoint and its driver count, for `/metrics` and for comparing drivers.

use std::sync::atomic::AtomicU64;

/// What an endpoint counts, readable from any thread while it runs. The endpoint counts
/// datagrams and misrouted packets; its driver counts its I/O (the system calls, or ring
/// operations, that moved the datagrams), so that drivers can be compared per delivery.
#[derive(Debug, Default)]
pub struct EndpointCounters {
    /// Datagrams handled.
    pub datagrams: AtomicU64,
    /// Receive operations that returned datagrams (`recvmmsg` calls, ring receive
    /// completions): with GRO and receive batching, fewer than `datagrams`.
    pub receive_calls: AtomicU64,
    /// Datagrams sent.
    pub datagrams_sent: AtomicU64,
    /// Send operations (`sendmsg` calls, or ring `sendmsg`s): with GSO, fewer than
    /// `datagrams_sent`.
    pub send_calls: AtomicU64,
    /// Short-header packets for a connection ID that names another worker: steered to
    /// the wrong worker (the worker count changed across a restart, or a client
    /// migrated). Dropped.
    pub misrouted: AtomicU64,
    /// Send operations the kernel refused (other than "would block"): their datagrams
    /// were lost, and QUIC retransmits them.
    pub send_errors: AtomicU64,
    /// Datagrams in those refused sends.
    pub datagrams_send_failed: AtomicU64,
    /// Lone datagrams the kernel refused as larger than the interface's MTU (`EMSGSIZE`):
    /// path MTU probes past what the local link carries. Not counted in `send_errors`:
    /// quiche takes such a probe as lost and probes smaller.
    pub oversize_refused: AtomicU64,
    /// Stateless resets sent: answers to short-header packets for a connection this
    /// endpoint no longer has (it restarted, or the connection closed).
    pub stateless_resets: AtomicU64,
    /// Times the thread that runs this endpoint ran out of work and waited (parked) for a
    /// datagram, a timer or a wake from another thread: `datagrams` over it is what one
    /// wake-up handles. 0 from a driver that cannot count them (the multi-threaded tokio
    /// driver, whose threads serve every connection).
    pub parks: AtomicU64,
}
