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
//!
//! A peer that sends nothing while we close (it had nothing to say, or what it said was
//! lost) gives no such cue, and the soak still saw a few sessions in a thousand end in the
//! relay's idle timeout that way. So the close also goes again one and two probe
//! timeouts after it last went ([`SILENT_RESENDS`]), unless a datagram arrived since:
//! quiche closes the connection for good at three. Two datagrams of a few dozen bytes
//! per close that was heard, against a peer kept for its whole idle timeout per one that
//! was not.

use std::time::{Duration, Instant};

use super::State;

/// The most times the close is sent again.
pub(super) const MOST_RESENDS: u32 = 6;

/// The most times the close is sent again on a timer, with nothing received.
pub(super) const SILENT_RESENDS: u32 = 2;

/// The least time between a close and its next copy on the timer.
const MIN_EVERY: Duration = Duration::from_millis(1);

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
    /// Times it was sent again on the timer.
    resent_on_timer: u32,
    /// A probe timeout, when it was sent: quiche closes for good after three.
    every: Duration,
    /// When it goes again if nothing arrives before.
    resend_at: Option<Instant>,
}

impl State {
    /// quiche produced `packet` while closing (the caller checked): the first such is the
    /// one carrying the CONNECTION_CLOSE (quiche sends it once, alone but for an ACK), and
    /// is kept.
    pub(super) fn remember_close(&mut self, packet: &[u8], info: quiche::SendInfo) {
        if self.close_packet.is_none() {
            // quiche set its timer to close for good three probe timeouts from now (a
            // floor, should a stall have eaten them all: then quiche closes first).
            let every = (self.conn.timeout().unwrap_or_default() / 3).max(MIN_EVERY);
            self.close_packet = Some(Box::new(ClosePacket {
                bytes: packet.to_vec(),
                info,
                received: 0,
                resent: 0,
                resent_on_timer: 0,
                every,
                resend_at: Some(Instant::now() + every),
            }));
        }
    }

    /// When the close goes again if the peer stays silent (see the module docs).
    pub(super) fn close_resend_at(&self) -> Option<Instant> {
        self.close_packet.as_ref().and_then(|close| close.resend_at)
    }

    /// The close goes again if its time came with nothing received since it last went.
    pub(super) fn resend_close_if_due(&mut self, now: Instant) {
        let Some(close) = self.close_packet.as_mut() else {
            return;
        };
        if close.resend_at.is_none_or(|at| at > now) {
            return;
        }
        close.resent_on_timer += 1;
        close.resend_at = (close.resent_on_timer < SILENT_RESENDS).then(|| now + close.every);
        self.send_close_again("no word from the peer since our close: sending it again");
    }

    /// A datagram arrived while closing: the peer may not have heard the close. On the
    /// 1st, 2nd, 4th… one, the close goes again.
    pub(super) fn answer_with_close(&mut self) {
        let Some(close) = self.close_packet.as_mut() else {
            return;
        };
        close.received += 1;
        // The peer is there: the timer waits a probe timeout from now.
        if close.resend_at.is_some() {
            close.resend_at = Some(Instant::now() + close.every);
        }
        if close.received.is_power_of_two() {
            self.send_close_again("the peer is still sending after our close: sending it again");
        }
    }

    /// Puts the close in the outbox (which the endpoint's next transmit pass empties),
    /// unless it went [`MOST_RESENDS`] times again already.
    fn send_close_again(&mut self, why: &'static str) {
        let Some(close) = self.close_packet.as_mut() else {
            return;
        };
        if close.resent == MOST_RESENDS {
            return;
        }
        close.resent += 1;
        tracing::debug!(conn = self.conn.trace_id(), resent = close.resent, "{why}");
        self.outbox.push_back((close.bytes.clone(), close.info));
    }

    /// Times the close was sent again.
    pub(super) fn closes_resent(&self) -> u32 {
        self.close_packet.as_ref().map_or(0, |close| close.resent)
    }
}
