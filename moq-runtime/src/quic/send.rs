//! Sending: the packets a connection has for the endpoint, in order (the outbox first),
//! each at its send time when the endpoint paces (`pacing.rs`).

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{QuicConnection, pacing};

/// One packet [`QuicConnection::send_datagram`] put in the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram {
    /// Its length.
    pub len: usize,
    /// Where it goes (and from which local address).
    pub info: quiche::SendInfo,
    /// A path MTU probe: larger than the path is known to carry, so it leaves alone.
    pub mtu_probe: bool,
}

impl QuicConnection {
    /// The next packet to send, if any: its length in `out` and where it goes.
    ///
    /// Call it until it returns `None` once the flush waker fired (or a packet arrived, or
    /// a timer ran): the flush waker is armed again by the first write after this call.
    pub fn send(&self, out: &mut [u8]) -> Result<Option<(usize, quiche::SendInfo)>, quiche::Error> {
        Ok(self.send_datagram(out)?.map(|sent| (sent.len, sent.info)))
    }

    /// [`send`](Self::send), also saying whether the packet is a path MTU probe (larger
    /// than the path is known to carry): such a packet must leave alone, not in a GSO
    /// batch with others, since a path that cannot carry it refuses the whole batch.
    pub fn send_datagram(&self, out: &mut [u8]) -> Result<Option<Datagram>, quiche::Error> {
        self.next_datagram(out, None)
    }

    /// [`send_datagram`](Self::send_datagram), pacing: a packet quiche wants sent later
    /// than `now` (the driver's reading for this turn) is held until then, and `None`
    /// returned; [`timeout`](Self::timeout) and [`status`](Self::status) say when it is
    /// due (`quic/pacing.rs`).
    pub fn send_paced(
        &self,
        out: &mut [u8],
        now: Instant,
    ) -> Result<Option<Datagram>, quiche::Error> {
        self.next_datagram(out, Some(now))
    }

    /// The next packet to send; with `now`, none before its send time.
    fn next_datagram(
        &self,
        out: &mut [u8],
        now: Option<Instant>,
    ) -> Result<Option<Datagram>, quiche::Error> {
        self.shared.flush_pending.store(false, Ordering::Release);
        let mut state = self.shared.state.lock();
        if let Some(at) = state.paced.at() {
            if now.is_some_and(|now| !pacing::is_due(at, now)) {
                return Ok(None);
            }
            return state.paced.release(out);
        }
        if let Some((packet, info)) = state.outbox.pop_front() {
            let Some(slot) = out.get_mut(..packet.len()) else {
                return Err(quiche::Error::BufferTooShort);
            };
            slot.copy_from_slice(&packet);
            let mtu_probe = packet.len() > state.path_mtu;
            return Ok(Some(Datagram {
                len: packet.len(),
                info,
                mtu_probe,
            }));
        }
        let mut result = state.next_packet(out).map(|sent| {
            sent.map(|(len, info)| Datagram {
                len,
                info,
                mtu_probe: len > state.path_mtu,
            })
        });
        if let (Some(now), Ok(Some(sent))) = (now, &result) {
            // quiche read the clock after the driver did: a packet it made due "now" may
            // read as later than the driver's `now` in a long turn, so look again.
            if !pacing::is_due(sent.info.at, now) && !pacing::is_due(sent.info.at, Instant::now()) {
                state.paced.hold(*sent, out);
                result = Ok(None);
            }
        }
        // Sending may close the connection (an idle timeout noticed, a close flushed).
        let wakes = state.process(false);
        drop(state);
        wakes.deliver(&self.shared);
        result
    }
}
