//! Lone FINs, held back until the bytes before them are acknowledged.
//!
//! quiche (up to at least 0.30, cloudflare/quiche#2525, fixed upstream by the unreleased
//! cloudflare/quiche#2665) counts a stream's sending side complete once its *bytes* are
//! acknowledged and its final size known, whether or not the FIN was acknowledged. A FIN
//! written with no bytes of its own (a group that ends after its last frame went out)
//! while some of those bytes are still in flight is then lost for good if its packet is
//! lost: the ACK for the bytes, which arrives first, lets quiche collect the stream, and
//! the lost FIN has no stream left to be retransmitted from. The peer reads every byte
//! and waits for the end of the stream forever. Under 5 % loss, a group whose end comes
//! after its frames never ends at a few percent of subscribers (the impaired conformance
//! suite, `tests/src/impaired.rs`, shows it on every driver).
//!
//! A FIN written once every byte before it is acknowledged is safe: quiche then keeps the
//! stream until the FIN itself is acknowledged, and resends it if it is lost. quiche
//! does not tell which bytes of a stream are acknowledged, so the FIN waits a little
//! longer than an acknowledgement can take: one and a half probe timeouts (smoothed RTT,
//! four deviations, the peer's ACK delay), doubled for every probe timeout since the
//! connection last saw an acknowledgement, as quiche backs its own off. It waits again
//! while the connection keeps detecting losses or firing probe timeouts (the stream's
//! bytes may be among what was lost, or be the lost tail a probe is for), and after
//! losses until an acknowledgement of new data came (a peer whose ACKs are lost leaves
//! the sender with nothing to detect), up to a bound after which it goes anyway. A FIN
//! that goes while some bytes still wait to be resent is written again once they were
//! (`parking.rs`).
//!
//! Only a FIN whose stream's last bytes already left in a packet, and may not be
//! acknowledged yet, is held (a group that ends just after its last frame went out), and
//! its end is delayed by about a round trip. A FIN written with the last bytes
//! (`poll_write_final`, a chat message's one frame), or after bytes no packet has taken
//! yet (a request answered and ended in one go), rides with them and is never held;
//! nor is one written longer than a wait after its bytes with nothing lost since and
//! acknowledgements come in ([`LastWrite::acknowledged`]: media, whose group ends when
//! the next begins).

use std::time::{Duration, Instant};

use super::parking::Recovery;

/// How long a held FIN may wait for the connection to stop losing packets, in first
/// waits, before it is written anyway.
const MAX_WAITS: u32 = 32;

/// The ACK delay a peer that announced none is assumed to use (RFC 9000 §18.2's default).
const DEFAULT_MAX_ACK_DELAY: Duration = Duration::from_millis(25);

/// When bytes were last written to a send stream: what tells whether a FIN after them
/// must be held.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LastWrite {
    /// The connection's count of emitted packets then.
    packets_emitted: u64,
    /// When.
    at: Instant,
    /// The connection's count of lost packets and probe timeouts then.
    losses: usize,
    /// The bytes the peer had acknowledged then.
    acked: u64,
}

impl LastWrite {
    /// A write to a stream of the connection `state` now.
    pub(super) fn now(state: &super::State) -> Self {
        Self {
            packets_emitted: state.packets_emitted,
            at: Instant::now(),
            losses: state.losses_seen,
            acked: state.acked_seen,
        }
    }

    /// No packet left since: the bytes are still queued, and a FIN written now rides
    /// with them.
    pub(super) fn still_queued(&self, state: &super::State) -> bool {
        self.packets_emitted == state.packets_emitted
    }

    /// The bytes are acknowledged by `now`, as far as the connection can tell: they were
    /// written longer ago than a held FIN's wait, the peer acknowledged bytes since, and
    /// nothing was lost or timed out since (a loss of their packet, or of its ACK, would
    /// have shown by then). A group whose end comes long after its last frame (media: at
    /// the next group) ends at once.
    pub(super) fn acknowledged(&self, state: &super::State, now: Instant) -> bool {
        let recovery = state.recovery();
        recovery.losses == self.losses
            && state.acked_seen != self.acked
            && now.saturating_duration_since(self.at) >= wait(&state.conn, recovery.probe_backoff)
    }
}

/// The FINs a connection holds back.
#[derive(Debug, Default)]
pub(super) struct HeldFins {
    held: Vec<HeldFin>,
    /// FINs held so far.
    total: u64,
}

#[derive(Debug)]
struct HeldFin {
    stream: u64,
    /// When to look again.
    due: Instant,
    /// The connection's count of lost packets and probe timeouts when it was last looked
    /// at.
    losses: usize,
    /// The connection lost packets while the FIN was held.
    lossy: bool,
    /// Written by then, whatever the losses.
    deadline: Instant,
}

impl HeldFins {
    /// Holds the FIN of `stream`, written at `now` on `conn`.
    pub(super) fn hold(
        &mut self,
        stream: u64,
        conn: &quiche::Connection,
        recovery: Recovery,
        now: Instant,
    ) {
        let wait = wait(conn, recovery.probe_backoff);
        tracing::trace!(stream, ?wait, "FIN held");
        self.total += 1;
        self.held.push(HeldFin {
            stream,
            due: now + wait,
            losses: recovery.losses,
            lossy: false,
            deadline: now + wait * MAX_WAITS,
        });
    }

    /// When the next held FIN is due, if any.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.held.iter().map(|fin| fin.due).min()
    }

    /// The streams whose FIN is held.
    pub(super) fn streams(&self) -> impl Iterator<Item = u64> + '_ {
        self.held.iter().map(|fin| fin.stream)
    }

    /// Whether any FIN is held.
    pub(super) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// How many FINs are held.
    pub(super) fn len(&self) -> usize {
        self.held.len()
    }

    /// How many FINs were held so far.
    pub(super) fn total(&self) -> u64 {
        self.total
    }

    /// Writes the FINs whose bytes are acknowledged by `now` (or whose wait ran out), and
    /// holds the rest longer if the connection lost packets since they were last looked
    /// at; true if any FIN was written. Each stream whose FIN is written goes to
    /// `written_to`.
    pub(super) fn release_due(
        &mut self,
        conn: &mut quiche::Connection,
        recovery: Recovery,
        now: Instant,
        mut written_to: impl FnMut(u64, &mut quiche::Connection),
    ) -> bool {
        if self.held.iter().all(|fin| fin.due > now) {
            return false;
        }
        let losses = recovery.losses;
        let probe_wait = wait(conn, recovery.probe_backoff);
        let mut wrote = false;
        self.held.retain_mut(|fin| {
            if fin.due > now {
                return true;
            }
            if now < fin.deadline {
                if losses != fin.losses {
                    tracing::trace!(
                        stream = fin.stream,
                        "held FIN: packets lost since, waiting longer"
                    );
                    fin.losses = losses;
                    fin.lossy = true;
                    fin.due = (now + probe_wait).min(fin.deadline);
                    return true;
                }
                if fin.lossy && !recovery.acked_since_loss {
                    // Nothing acknowledged since the losses: the probes may be lost too,
                    // and quiche's next probe timeout is further out than our wait.
                    tracing::trace!(
                        stream = fin.stream,
                        "held FIN: nothing acknowledged since the losses, waiting longer"
                    );
                    fin.due = (now + probe_wait).min(fin.deadline);
                    return true;
                }
            }
            // A stream stopped or reset since, or a connection closing: no FIN to write.
            let written = conn.stream_send(fin.stream, &[], true);
            tracing::trace!(
                stream = fin.stream,
                ?written,
                late = now >= fin.deadline,
                "held FIN written"
            );
            if written.is_ok() {
                wrote = true;
                written_to(fin.stream, conn);
            }
            false
        });
        wrote
    }
}

/// How long a held FIN waits before it is looked at: one and a half times the longest an
/// acknowledgement of a packet sent now should take to come back (RFC 9002 §6.2.1's
/// probe timeout: smoothed RTT, four times its variation, the peer's ACK delay, doubled
/// for each probe timeout since the last acknowledgement, as quiche backs it off), so
/// that a probe timeout due for the same bytes fires first.
fn wait(conn: &quiche::Connection, backoff: u32) -> Duration {
    let (rtt, rttvar) = super::migration::active_path(conn)
        .map_or((Duration::from_millis(333), Duration::ZERO), |path| {
            (path.rtt, path.rttvar)
        });
    let ack_delay = conn
        .peer_transport_params()
        .map_or(DEFAULT_MAX_ACK_DELAY, |params| {
            Duration::from_millis(params.max_ack_delay)
        });
    let probe_timeout = rtt + (rttvar * 4).max(Duration::from_millis(1)) + ack_delay;
    probe_timeout * 3 / 2 * (1 << backoff.min(MAX_BACKOFF))
}

/// The most doublings of a wait for a probe timeout that backed off.
const MAX_BACKOFF: u32 = 6;
