//! A close that was lost: the datagram that carried our CONNECTION_CLOSE is sent again
//! when the peer shows it did not hear it.
//!
//! Why: quiche 0.30 sends a connection's CONNECTION_CLOSE once, then, while closing (three
//! probe timeouts), drops whatever arrives without an answer. If that one datagram is
//! lost, the peer learns nothing and keeps the connection until its idle timeout: in the
//! soak at 1 % loss, about one client in a hundred that left a room stayed a member of it,
//! its session open on the relay, for the relay's 30 s idle timeout (57 of 5,315 closes in
//! the first half hour of the 2-hour run). RFC 9000 §10.2.1: an endpoint in the closing
//! state answers incoming packets with a CONNECTION_CLOSE, at a limited rate, and may send
//! the very packet that carried it again (the one exception to a new packet number per
//! packet). So the datagram is kept, and sent again on the 1st, 2nd, 4th, 8th… datagram
//! received while closing, at most [`MOST_RESENDS`] times.

use super::State;

/// The most times the close is sent again.
pub(super) const MOST_RESENDS: u32 = 6;

/// The datagram that carried our CONNECTION_CLOSE, and what arrived since.
#[derive(Debug)]
pub(super) struct ClosePacket {
    /// The datagram, as sent.
    bytes: Vec<u8>,
    /// Where it went.
    info: quiche::SendInfo,
    /// Datagrams received while closing.
    received: u32,
    /// Times it was sent again.
    resent: u32,
}

impl State {
    /// quiche produced `packet` while closing (the caller checked): the first such is the
    /// one carrying the CONNECTION_CLOSE (quiche sends it once, alone but for an ACK), and
    /// is kept.
    pub(super) fn remember_close(&mut self, packet: &[u8], info: quiche::SendInfo) {
        if self.close_packet.is_none() {
            self.close_packet = Some(ClosePacket {
                bytes: packet.to_vec(),
                info,
                received: 0,
                resent: 0,
            });
        }
    }

    /// A datagram arrived while closing: the peer may not have heard the close. On the
    /// 1st, 2nd, 4th… one, the close goes again (in the outbox, which the endpoint's next
    /// transmit pass empties).
    pub(super) fn answer_with_close(&mut self) {
        let Some(close) = self.close_packet.as_mut() else {
            return;
        };
        close.received += 1;
        if !close.received.is_power_of_two() || close.resent == MOST_RESENDS {
            return;
        }
        close.resent += 1;
        tracing::debug!(
            conn = self.conn.trace_id(),
            resent = close.resent,
            "the peer is still sending after our close: sending it again"
        );
        self.outbox.push_back((close.bytes.clone(), close.info));
    }

    /// Times the close was sent again.
    pub(super) fn closes_resent(&self) -> u32 {
        self.close_packet.as_ref().map_or(0, |close| close.resent)
    }
}
