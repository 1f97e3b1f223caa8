//! When a client connection that was receiving data from its server, and hears nothing
//! more, sends a PING: how the server learns the client's new address after a NAT
//! rebinding (see [`SILENCE_PROBE`]).
//!
//! One PING per silence was not enough. It can be lost, and it can reach a server that
//! then loses the client again: in the rebinding soak a server acknowledged the PING from
//! the client's new address, gave that address up a moment later (its challenge there
//! lost) and went on sending to an address the client had left, while the client, its
//! PING answered, said nothing until its keep-alive, 9 s on. So the PINGs go on while no
//! data arrives, each wait twice the one before, [`SILENCE_PROBES`] in all: a quiet spell
//! costs a client four PINGs (1, 3, 7 and 15 s into it), and data resets the count.

use std::time::{Duration, Instant};

/// How long a client connection (one with a keep-alive) that was receiving data from its
/// server (stream data or datagrams; not acknowledgements) waits in silence before it
/// sends a PING (and then more, further apart: [`SILENCE_PROBES`]). A NAT that rebinds
/// drops what the server sends to the client's old public address, and the server learns
/// the new one only from the client's next packet: a client that only receives (a media
/// subscriber) sends none once nothing arrives, and would wait its whole keep-alive
/// interval (QUIC stacks in browsers do the same, sooner, while streams are open). A
/// second costs a chat client a few PINGs and their ACKs per quiet spell, and caps a
/// subscriber's stall at a rebinding near a second (the server then sends again what it
/// lost, `quic/migration.rs`).
pub const SILENCE_PROBE: Duration = Duration::from_secs(1);

/// The most PINGs sent in one silence, [`SILENCE_PROBE`] after the last data and then
/// each wait twice the one before.
pub const SILENCE_PROBES: u32 = 4;

/// One client connection's silence probes.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SilenceProbe {
    /// When the next PING goes, if nothing arrives first.
    at: Option<Instant>,
    /// PINGs sent since data last arrived.
    sent: u32,
}

impl SilenceProbe {
    /// Data arrived at `now`: the first PING goes [`SILENCE_PROBE`] later if nothing more
    /// does.
    pub(crate) fn heard(&mut self, now: Instant) {
        self.at = Some(now + SILENCE_PROBE);
        self.sent = 0;
    }

    /// When the next PING is due.
    pub(crate) fn at(&self) -> Option<Instant> {
        self.at
    }

    /// Whether a PING is due at `now`; if so it counts as sent, and the next is set.
    pub(crate) fn fire(&mut self, now: Instant) -> bool {
        if self.at.is_none_or(|at| at > now) {
            return false;
        }
        self.sent += 1;
        self.at = (self.sent < SILENCE_PROBES).then(|| now + SILENCE_PROBE * (1 << self.sent));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The PINGs one silence sends, as (seconds into it) for a timer run every 100 ms.
    fn pings(probe: &mut SilenceProbe, start: Instant) -> Vec<u64> {
        let mut at = Vec::new();
        for tenth in 0..600u64 {
            let now = start + std::time::Duration::from_millis(100 * tenth);
            if probe.fire(now) {
                at.push(tenth / 10);
            }
        }
        at
    }

    #[test]
    fn a_silence_sends_pings_backing_off_then_none() {
        let start = Instant::now();
        let mut probe = SilenceProbe::default();
        assert!(
            pings(&mut probe, start).is_empty(),
            "nothing heard, nothing sent"
        );
        probe.heard(start);
        assert_eq!(pings(&mut probe, start), [1, 3, 7, 15]);
        assert_eq!(probe.at(), None);
    }

    #[test]
    fn data_starts_the_count_again() {
        let start = Instant::now();
        let mut probe = SilenceProbe::default();
        probe.heard(start);
        assert!(probe.fire(start + SILENCE_PROBE));
        assert!(!probe.fire(start + SILENCE_PROBE), "one at a time");
        let later = start + SILENCE_PROBE * 2;
        probe.heard(later);
        assert_eq!(probe.at(), Some(later + SILENCE_PROBE));
        assert_eq!(pings(&mut probe, later), [1, 3, 7, 15]);
    }
}
