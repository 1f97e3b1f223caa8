//! Streams with nothing to send, kept from heading quiche's send queue.
//!
//! quiche 0.30's send loop takes the first stream of its queue of streams with data to
//! send and, when that stream has nothing to emit (no bytes, no FIN), stops filling the
//! packet without taking the stream off the queue. A stream gets there when part of a
//! packet is resent after a probe timeout and the original packet's ACK then arrives
//! before the rest went out: the ACK drops the stream's bytes, and the stream stays
//! queued with none. Not incremental (a group's stream goes whole before the next at its
//! level), it keeps its place at the head, and nothing behind it is ever sent again: a
//! connection stalls for good, congestion window open (found through the impairment
//! proxy: `tests/src/impaired.rs`, RELIABILITY.md "Real networks").
//!
//! quiche offers no way to take a stream off that queue, but a new priority moves it
//! within it. So after a probe timeout or a loss, which is what it takes to get there,
//! every open send stream that has not written its FIN (and every stream whose FIN is
//! held, `fins.rs`) is *parked*: given the least
//! urgent level there is, incrementally, which quiche orders after every other stream.
//! A parked stream that is stuck then heads nothing but other parked streams. Its next
//! write gives it its place back. What parking costs: until a parked stream is written
//! again, bytes it still had queued go after every other stream's.

use super::State;

/// The least urgent level there is, given incrementally: after every stream of ours.
const PARKED: u8 = u8::MAX;

/// The urgency quiche gives a stream nobody prioritized (control streams keep it).
const DEFAULT_URGENCY: u8 = 127;

impl State {
    /// Parks every open send stream without its FIN if the connection lost a packet, or
    /// (`probes`: after its timers ran, where probe timeouts fire) fired a probe timeout,
    /// since the last look. A packet's work is one counter read.
    pub(super) fn park_if_lossy(&mut self, probes: bool) {
        if probes {
            self.probes_seen = self
                .conn
                .path_stats()
                .map(|path| path.total_pto_count)
                .sum::<usize>();
        }
        let losses = self.conn.stats().lost + self.probes_seen;
        if losses == self.losses_seen {
            return;
        }
        self.losses_seen = losses;
        self.park_sweeps += 1;
        for (&id, entry) in &mut self.streams {
            // Peer-opened uni streams are ours to read only.
            let ours_to_write = id & 2 == 0 || (id & 1 == 1) == self.server;
            if !ours_to_write || self.conn.stream_closed(id) {
                continue;
            }
            if self.conn.stream_priority(id, PARKED, true).is_ok() {
                entry.parked = true;
            }
        }
        // A stream whose FIN is held has sent every byte and has no handle left: parked
        // for good, until its FIN goes.
        for id in self.held_fins.streams() {
            let _ = self.conn.stream_priority(id, PARKED, true);
        }
    }

    /// Gives stream `id` its place back if it was parked (it is about to be written).
    pub(super) fn unpark(&mut self, id: u64) {
        let Some(entry) = self.streams.get_mut(&id) else {
            return;
        };
        if !std::mem::take(&mut entry.parked) {
            return;
        }
        let urgency = self.urgencies.level(id).unwrap_or(DEFAULT_URGENCY);
        let _ = self.conn.stream_priority(id, urgency, false);
    }
}
