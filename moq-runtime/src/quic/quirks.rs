//! Where the adapter works around quiche's defects: one file to shrink as quiche fixes
//! them. Each names the defect, what goes wrong without the workaround, and the test that
//! reproduces it.
//!
//! - **A lone FIN lost to an early ACK** (cloudflare/quiche#2525, up to at least 0.30):
//!   [`State::emit_before_acks`].
//! - **Handshake probes forever after a close** (quiche 0.30): [`State::next_packet`]
//!   abandons the connection; `tests/quiche_close_loop.rs` reproduces it.
//! - **A path holding a connection ID the peer retired** (quiche 0.30) fails every
//!   `send` once it is to be probed: `unsendable.rs` sends around it.
//! - Elsewhere, for the same reason: a receive half dropped early is drained, not
//!   stopped, because quiche never frees a stream it was asked to stop sending
//!   (cloudflare/quiche#1968; the module documentation of `quic`), and streams are parked
//!   after a loss when quiche keeps sending a stuck one first (`parking.rs`).

use super::State;

/// Long-header packets a closing connection may send before it is abandoned: a
/// CONNECTION_CLOSE in the Initial and the Handshake space, and a couple to spare.
const MAX_CLOSING_LONG_HEADERS: u32 = 4;

impl State {
    /// Puts whatever is queued (a lone FIN in particular) into packets now, before the
    /// next received datagram's ACKs are processed. The packets wait in the outbox for the
    /// endpoint's next transmit pass, which the receive schedules anyway.
    ///
    /// Why: quiche (up to at least 0.30, cloudflare/quiche#2525) counts a stream's sending
    /// side complete once its *bytes* are acknowledged, ignoring whether the FIN was. A
    /// FIN written with no bytes after all the bytes were sent is then lost if an ACK for
    /// those bytes arrives before the FIN is in a packet: the stream is collected with the
    /// FIN still queued, and the peer waits for the end of the stream forever. Writing the
    /// FIN with the last bytes (`poll_write_final`) avoids a lone FIN where the end is
    /// known in time; this closes the window for the rest. What it cannot close: a packet
    /// carrying a lone FIN that is lost after the bytes' ACK (quiche no longer has the
    /// stream to retransmit it from), or a congestion window too full to emit it.
    pub(super) fn emit_before_acks(&mut self) {
        self.lone_fin = false;
        let _ = self.emit_now();
    }

    /// quiche's next packet, or `None` once it has nothing to send.
    ///
    /// A client that closes with an application error after its handshake completed but
    /// before it was confirmed, with a Handshake-space probe due (its Finished not yet
    /// acknowledged: a lossy or slow path), makes quiche 0.30 produce Handshake-space
    /// probes forever: every `send` returns another packet, none carries the close, and
    /// the draining timer is never set. A connection that produced more long-header
    /// packets while closing than a close can take is abandoned here: it sends nothing
    /// more and counts as closed (its peer, which never learns the close code, times
    /// out). `tests/quiche_close_loop.rs` reproduces the state.
    pub(super) fn next_packet(
        &mut self,
        out: &mut [u8],
    ) -> Result<Option<(usize, quiche::SendInfo)>, quiche::Error> {
        if self.abandoned {
            return Ok(None);
        }
        let sent = match self.quiche_send(out) {
            Err(quiche::Error::Done) => self.send_past_parked(out),
            sent => sent.map(Some),
        };
        match sent {
            Ok(Some((len, mut info))) => {
                self.migrations.redirect(&mut info);
                self.packets_emitted += 1;
                let closing = self.conn.local_error().is_some();
                if closing {
                    self.remember_close(&out[..len], info);
                }
                let long_header = out.first().is_some_and(|byte| byte & 0x80 != 0);
                if long_header && closing {
                    self.closing_long_headers += 1;
                    if self.closing_long_headers > MAX_CLOSING_LONG_HEADERS {
                        tracing::debug!(
                            "quiche keeps sending handshake probes after the close; abandoning the connection"
                        );
                        self.abandoned = true;
                        return Ok(None);
                    }
                }
                Ok(Some((len, info)))
            }
            Ok(None) => {
                // Everything that could go out went out, a lone FIN included.
                self.lone_fin = false;
                self.note_done();
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }
}
