//! Packets quiche wants sent later: pacing (RFC 9002 §7.7).
//!
//! A congestion controller that paces (quiche's BBRv2; its CUBIC and Reno do not, and
//! set every packet's send time to the moment it was made) gives each packet a send time,
//! `SendInfo::at`, that spreads a window over a round trip instead of sending it at line
//! rate: a burst of a whole window overflows a shallow router queue, and the flow loses
//! the burst's tail.
//!
//! The endpoint sends at once what is due within [`GRANULARITY`] (the timer wheel's
//! resolution: a packet due sooner would wait a whole tick) and holds the first packet
//! that is not. The connection then sends nothing more until that time (its later
//! packets are due later still), its timer wakes it then, and the turn goes on with the
//! other connections: a turn never waits for a send time.

use std::time::{Duration, Instant};

use super::{Datagram, QuicConnection};

/// How early a packet may leave: the timer wheel's tick.
pub(super) const GRANULARITY: Duration = Duration::from_millis(1);

/// Whether a packet quiche wants sent at `at` may leave at `now`.
pub(super) fn is_due(at: Instant, now: Instant) -> bool {
    at <= now + GRANULARITY
}

/// The packet a connection holds until its send time.
#[derive(Debug, Default)]
pub(super) struct Paced {
    /// The packet held, its bytes the first `len` of `buffer`.
    held: Option<Datagram>,
    /// Kept from one hold to the next: holding allocates nothing in the steady state.
    buffer: Vec<u8>,
    /// Packets held so far.
    holds: u64,
}

impl Paced {
    /// When the packet held is due, if one is.
    pub(super) fn at(&self) -> Option<Instant> {
        self.held.map(|held| held.info.at)
    }

    /// Holds `sent` (its bytes the start of `packet`) until its send time.
    pub(super) fn hold(&mut self, sent: Datagram, packet: &[u8]) {
        self.buffer.clear();
        self.buffer.extend_from_slice(&packet[..sent.len]);
        self.held = Some(sent);
        self.holds += 1;
    }

    /// Copies the packet held into `out` and lets it go.
    pub(super) fn release(&mut self, out: &mut [u8]) -> Result<Option<Datagram>, quiche::Error> {
        let Some(held) = self.held else {
            return Ok(None);
        };
        let slot = out
            .get_mut(..held.len)
            .ok_or(quiche::Error::BufferTooShort)?;
        slot.copy_from_slice(&self.buffer[..held.len]);
        self.held = None;
        Ok(Some(held))
    }

    /// Packets held so far.
    pub(super) fn holds(&self) -> u64 {
        self.holds
    }
}

impl QuicConnection {
    /// Packets held so far until the send time quiche gave them (pacing: only with a
    /// congestion controller that paces, [`CongestionControl::Bbr2`]).
    ///
    /// [`CongestionControl::Bbr2`]: crate::quiche_config::CongestionControl::Bbr2
    pub fn packets_paced(&self) -> u64 {
        self.shared.state.lock().paced.holds()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datagram(len: usize, at: Instant) -> Datagram {
        let address = std::net::SocketAddr::from(([127, 0, 0, 1], 443));
        Datagram {
            len,
            info: quiche::SendInfo {
                from: address,
                to: address,
                at,
            },
            mtu_probe: false,
        }
    }

    #[test]
    fn a_packet_is_due_within_a_tick() {
        let now = Instant::now();
        assert!(is_due(now, now));
        assert!(is_due(now + GRANULARITY, now));
        assert!(!is_due(now + GRANULARITY * 2, now));
    }

    #[test]
    fn a_held_packet_comes_back_whole_once() {
        let mut paced = Paced::default();
        let at = Instant::now() + Duration::from_millis(5);
        paced.hold(datagram(3, at), &[1, 2, 3, 4]);
        assert_eq!(paced.at(), Some(at));
        let mut out = [0; 2];
        assert_eq!(paced.release(&mut out), Err(quiche::Error::BufferTooShort));
        let mut out = [0; 8];
        assert_eq!(paced.release(&mut out), Ok(Some(datagram(3, at))));
        assert_eq!(out[..3], [1, 2, 3]);
        assert_eq!(paced.at(), None);
        assert_eq!(paced.release(&mut out), Ok(None));
        assert_eq!(paced.holds(), 1);
    }
}
