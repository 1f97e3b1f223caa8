//! A stream stuck at the head of quiche's send queue with no loss to sweep it.
//!
//! `parking.rs` parks every send stream after a loss or a probe timeout, which frees a
//! stream stuck at the head of quiche's queue (a stream queued with nothing to emit).
//! Seen at 10 % loss (io_uring, about one run in eight, RELIABILITY.md "The 10 % stall"):
//! a subscriber's connection from the relay kept 6 KB of new frames for good, nothing in
//! flight and its window open, with no loss since the last sweep to set one off; each
//! keep-alive woke its writers, which wrote more that quiche took and never sent.
//!
//! What shows it: quiche takes the bytes written since it last said it had nothing to
//! send, and next to nothing leaves. A connection short of congestion window looks the
//! same at that moment (its window spent on retransmissions since the peer's last ACK,
//! which quiche's sending capacity has not caught up with), and parking every stream of
//! such a connection reorders what it sends for nothing: checked at once, chat through
//! 1 % loss paid for it in its p99 (32 ms against 83 ms, BENCHMARKS.md). So the check is
//! made a probe timeout later ([`State::check_kept_bytes`]): by then a window-limited
//! connection heard an ACK, or fired a probe timeout (which parks every stream anyway),
//! and sent the bytes; a stuck one still has not, and its streams are parked then.

use std::time::{Duration, Instant};

use super::State;

/// The bytes written and sent since quiche last said it had nothing to send, and the
/// check due when too little of them left.
#[derive(Debug, Default)]
pub(super) struct KeptBytes {
    /// Stream bytes written since quiche last said it had nothing to send.
    written: u64,
    /// quiche's count of bytes sent at the first of those writes.
    sent_at_write: u64,
    /// A check due: when, quiche's bytes sent then, and how many bytes it kept.
    check: Option<Check>,
    /// Times every stream was parked because the check found the bytes still kept.
    sweeps: u64,
}

/// A check of bytes quiche kept, due a probe timeout after it kept them.
#[derive(Debug, Clone, Copy)]
struct Check {
    at: Instant,
    sent_bytes: u64,
    kept: u64,
}

/// The least wait before a check: the delayed-ACK allowance of a peer (RFC 9000's
/// default `max_ack_delay`) beyond the round trip.
const ACK_DELAY: Duration = Duration::from_millis(25);

impl KeptBytes {
    /// When the check is due, if one is.
    pub(super) fn check_at(&self) -> Option<Instant> {
        self.check.map(|check| check.at)
    }

    /// Times every stream was parked for kept bytes.
    pub(super) fn sweeps(&self) -> u64 {
        self.sweeps
    }
}

impl State {
    /// Notes `bytes` written to a send stream: two counter reads on the first write after
    /// quiche said it was done, an addition on the others.
    pub(super) fn note_written(&mut self, bytes: usize) {
        if self.kept.written == 0 {
            self.kept.sent_at_write = self.conn.stats().sent_bytes;
        }
        self.kept.written += bytes as u64;
    }

    /// After quiche said it had nothing to send (and asking past parked streams found
    /// nothing): if it kept most of what was written since it last said so (less than
    /// half of it, or of a packet, left), a check is due a probe timeout from now, unless
    /// one is due already or a packet waits for its send time.
    pub(super) fn note_done(&mut self) {
        let written = std::mem::take(&mut self.kept.written);
        if written == 0 || self.kept.check.is_some() || self.paced.at().is_some() {
            return;
        }
        let sent_bytes = self.conn.stats().sent_bytes;
        let sent = sent_bytes.saturating_sub(self.kept.sent_at_write);
        if !self.kept_most(written, sent) {
            return;
        }
        let wait = self.conn.path_stats().find(|path| path.active).map_or(
            Duration::from_millis(333),
            |path| {
                // RFC 9002's probe timeout, with its granularity under the rttvar term.
                path.rtt + (path.rttvar * 4).max(Duration::from_millis(1)) + ACK_DELAY
            },
        );
        self.kept.check = Some(Check {
            at: Instant::now() + wait,
            sent_bytes,
            kept: written - sent,
        });
    }

    /// Whether quiche kept most of `bytes` with only `sent` bytes sent since: less than
    /// half of them, or of a packet, left. Sending all but the last few bytes is not
    /// keeping them (a packet's headers count as sent, the bytes written do not).
    fn kept_most(&self, bytes: u64, sent: u64) -> bool {
        let packet = self.conn.max_send_udp_payload_size() as u64;
        sent.saturating_mul(2) < bytes.min(packet)
    }

    /// Makes the check once due at `now`: if less than half of the bytes quiche kept (or
    /// of a packet) left since, a stream with nothing to send heads its queue, and every
    /// stream is parked (`parking.rs`), which sets the send loop asking past them.
    pub(super) fn check_kept_bytes(&mut self, now: Instant) {
        let Some(check) = self.kept.check.filter(|check| check.at <= now) else {
            return;
        };
        self.kept.check = None;
        if self.paced.at().is_some() {
            // Sending, at the pace quiche sets.
            return;
        }
        let sent = self
            .conn
            .stats()
            .sent_bytes
            .saturating_sub(check.sent_bytes);
        if !self.kept_most(check.kept, sent) {
            return;
        }
        tracing::debug!(
            conn = self.conn.trace_id(),
            kept = check.kept,
            sent,
            "quiche kept bytes it had room for a probe timeout long: a stream with nothing to send heads its queue; every stream parked"
        );
        self.kept.sweeps += 1;
        self.park_every_stream();
    }
}
