//! What a worker counts, readable from any thread while it runs: the figures the
//! driver's benchmarks divide by deliveries.

use std::sync::atomic::{AtomicU64, Ordering};

/// One worker's counts since it started.
#[derive(Debug, Default)]
pub struct WorkerCounters {
    /// `io_uring_enter` calls: the worker's system calls for I/O (submitting, waiting).
    pub enters: AtomicU64,
    /// Turns that ended parked in the ring (waiting for a completion or a deadline).
    pub parks: AtomicU64,
    /// Receive completions: one per datagram, or per GRO train.
    pub receives: AtomicU64,
    /// Datagrams received.
    pub datagrams_received: AtomicU64,
    /// Receives that held more than one datagram (GRO trains).
    pub coalesced_receives: AtomicU64,
    /// `sendmsg` operations submitted: one per batch with GSO, per datagram without.
    pub sendmsgs: AtomicU64,
    /// Datagrams sent.
    pub datagrams_sent: AtomicU64,
    /// `sendmsg`s that carried more than one datagram (GSO batches).
    pub batched_sendmsgs: AtomicU64,
    /// Times the receive buffers ran out (`ENOBUFS`): the receive was armed again once
    /// buffers came back.
    pub buffer_exhaustions: AtomicU64,
    /// Receives cut short (`MSG_TRUNC`): never with incremental buffers.
    pub truncated: AtomicU64,
    /// Turns that stopped taking receive completions at the per-turn datagram budget (the
    /// rest waited for the next turn, after timers and sends ran).
    pub receive_budget_exhausted: AtomicU64,
    /// Turns in which a port took no packets from its connections because its sends in
    /// flight were at their bound (the kernel had not taken them yet).
    pub send_backpressure: AtomicU64,
    /// Stops whose park wait was still pending a second after it was cancelled: the ring
    /// was torn down with it. Zero unless the kernel misbehaves.
    pub unclean_stops: AtomicU64,
}

impl WorkerCounters {
    pub(crate) fn add(&self, counter: &AtomicU64, by: u64) {
        counter.fetch_add(by, Ordering::Relaxed);
    }

    /// A copy of every count.
    pub fn snapshot(&self) -> WorkerSnapshot {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        WorkerSnapshot {
            enters: read(&self.enters),
            parks: read(&self.parks),
            receives: read(&self.receives),
            datagrams_received: read(&self.datagrams_received),
            coalesced_receives: read(&self.coalesced_receives),
            sendmsgs: read(&self.sendmsgs),
            datagrams_sent: read(&self.datagrams_sent),
            batched_sendmsgs: read(&self.batched_sendmsgs),
            buffer_exhaustions: read(&self.buffer_exhaustions),
            truncated: read(&self.truncated),
            receive_budget_exhausted: read(&self.receive_budget_exhausted),
            send_backpressure: read(&self.send_backpressure),
            unclean_stops: read(&self.unclean_stops),
        }
    }
}

/// [`WorkerCounters`] read at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)] // the fields are WorkerCounters'
pub struct WorkerSnapshot {
    pub enters: u64,
    pub parks: u64,
    pub receives: u64,
    pub datagrams_received: u64,
    pub coalesced_receives: u64,
    pub sendmsgs: u64,
    pub datagrams_sent: u64,
    pub batched_sendmsgs: u64,
    pub buffer_exhaustions: u64,
    pub truncated: u64,
    pub receive_budget_exhausted: u64,
    pub send_backpressure: u64,
    pub unclean_stops: u64,
}

impl std::ops::Add for WorkerSnapshot {
    type Output = Self;

    /// Field by field: the counts of several workers together.
    fn add(self, other: Self) -> Self {
        Self {
            enters: self.enters + other.enters,
            parks: self.parks + other.parks,
            receives: self.receives + other.receives,
            datagrams_received: self.datagrams_received + other.datagrams_received,
            coalesced_receives: self.coalesced_receives + other.coalesced_receives,
            sendmsgs: self.sendmsgs + other.sendmsgs,
            datagrams_sent: self.datagrams_sent + other.datagrams_sent,
            batched_sendmsgs: self.batched_sendmsgs + other.batched_sendmsgs,
            buffer_exhaustions: self.buffer_exhaustions + other.buffer_exhaustions,
            truncated: self.truncated + other.truncated,
            receive_budget_exhausted: self.receive_budget_exhausted
                + other.receive_budget_exhausted,
            send_backpressure: self.send_backpressure + other.send_backpressure,
            unclean_stops: self.unclean_stops + other.unclean_stops,
        }
    }
}
