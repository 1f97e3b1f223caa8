//! Streams with nothing to send, kept from heading quiche's send queue, and FINs that
//! quiche's send queue drops.
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
//! every send stream quiche still has is *parked*: given the least urgent level there
//! is, incrementally, which quiche orders after every other stream. That is every open
//! send stream, every stream whose FIN is held (`fins.rs`), and every stream whose FIN
//! is written that quiche has not let go: with no handle left, those are found through
//! a list of their own ([`FinishedStreams`]). An open stream's next write gives it its
//! place back. What parking costs: until a parked stream is written again, bytes it
//! still had queued go after every other stream's.
//!
//! A parked stream that is stuck still heads the parked ones. quiche moves an incremental
//! stream with nothing to emit to the back of its level, but ends the packet there: with
//! nothing else to send, `send` says it is done though streams behind it have something.
//! So while streams are parked, a "done" is asked again, once per parked stream at
//! most ([`State::send_past_parked`]). Only until a round of asking finds nothing behind
//! them with room to send it: a parked stream gets bytes again only through a write,
//! which unparks it first, so from then on nothing parked has anything to send until
//! the next sweep, or until something is queued on a parked stream (a held FIN released,
//! FINs written again, a last best-effort write), which sets the asking going again.
//! (Asking costs a whole `send` call; a connection on a busy host fires a spurious probe
//! timeout now and then, and its parked streams, long-lived control streams among them,
//! would otherwise cost one per stream on every flush for hours.)
//!
//! quiche sends a FIN only with the stream's last bytes, or alone once the stream has
//! nothing else queued. A FIN written while a range in the middle of the stream waits to
//! be resent is lost for good: sending that range takes the stream off the queue with
//! the FIN never sent, and the ACK that follows completes the stream. So after the
//! connection resent stream data, every finished stream quiche still has gets its FIN
//! written again: a stream with nothing else queued is queued for it, and sends one
//! more FIN (an empty STREAM frame, which the peer ignores if it has the end already).

use super::State;

/// The least urgent level there is, given incrementally: after every stream of ours.
const PARKED: u8 = u8::MAX;

/// The urgency quiche gives a stream nobody prioritized (control streams keep it), given
/// incrementally ([`State::open`] sets it to make a stream exist).
pub(super) const DEFAULT_URGENCY: u8 = 127;

impl State {
    /// Parks every send stream quiche has if the connection lost a packet, or
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
        let stats = self.conn.stats();
        if stats.acked_bytes != self.acked_seen {
            // quiche's probe timeout stops backing off with an acknowledgement.
            self.acked_seen = stats.acked_bytes;
            self.probes_at_ack = self.probes_seen;
        }
        let losses = stats.lost + self.probes_seen;
        if losses == self.losses_seen {
            return;
        }
        self.losses_seen = losses;
        self.acked_at_loss = stats.acked_bytes;
        self.park_every_stream();
    }

    /// Parks every send stream quiche still has: open ones, those whose FIN is held, and
    /// those whose FIN is written that quiche has not let go.
    pub(super) fn park_every_stream(&mut self) {
        self.park_sweeps += 1;
        self.parked_may_send = true;
        for (&id, entry) in &mut self.streams {
            // Peer-opened uni streams are ours to read only.
            let ours_to_write = id & 2 == 0 || (id & 1 == 1) == self.server;
            if !ours_to_write || entry.parked || self.conn.stream_closed(id) {
                continue;
            }
            if self.conn.stream_priority(id, PARKED, true).is_ok() {
                entry.parked = true;
                self.open_parked += 1;
            }
        }
        // A stream whose FIN is held has sent every byte and has no handle left: parked
        // for good, until its FIN goes.
        for id in self.held_fins.streams() {
            let _ = self.conn.stream_priority(id, PARKED, true);
        }
        self.finished.park(&mut self.conn);
    }

    /// What the connection's loss recovery looks like now, as of the last packet or timer.
    pub(super) fn recovery(&self) -> Recovery {
        Recovery {
            losses: self.losses_seen,
            probe_backoff: u32::try_from(self.probes_seen - self.probes_at_ack).unwrap_or(u32::MAX),
            acked_since_loss: self.acked_seen != self.acked_at_loss,
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
        self.open_parked = self.open_parked.saturating_sub(1);
        let urgency = self.urgencies.level(id).unwrap_or(DEFAULT_URGENCY);
        let _ = self.conn.stream_priority(id, urgency, false);
    }

    /// After quiche said it has nothing to send: writes again the FINs that resent data
    /// may have cost, and asks again past every parked stream that may be stuck; the
    /// next packet, if that gave one.
    pub(super) fn send_past_parked(
        &mut self,
        out: &mut [u8],
    ) -> Result<Option<(usize, quiche::SendInfo)>, quiche::Error> {
        if !self.finished.is_empty() {
            let resent = self.conn.stats().stream_retrans_bytes;
            if resent != self.resent_seen {
                self.resent_seen = resent;
                self.finished.write_fins_again(&mut self.conn);
                // Queued on parked streams, maybe behind a stuck one.
                self.parked_may_send = true;
            }
        }
        if !self.parked_may_send {
            return Ok(None);
        }
        // The first "done" was asked already: once more per parked stream.
        let parked = self.open_parked + self.held_fins.len() + self.finished.parked();
        for _ in 0..parked {
            self.sends_past_parked += 1;
            match self.quiche_send(out) {
                Ok(sent) => return Ok(Some(sent)),
                Err(quiche::Error::Done) => {}
                Err(error) => return Err(error),
            }
        }
        // Every stuck stream was passed, and what is behind them had nothing to send,
        // unless the congestion window (or the peer's credit) had no room for a packet.
        if self.room_for_a_packet() {
            self.parked_may_send = false;
        }
        Ok(None)
    }

    /// Whether the connection could send a full packet of stream data now: quiche's
    /// sending capacity bounds every stream's, so a stream with room for a packet shows
    /// that the connection has it. `false` when no stream shows it (a window too small
    /// on each, or none known to read it by): asking again costs calls, never a stall.
    fn room_for_a_packet(&mut self) -> bool {
        let packet = self.conn.max_send_udp_payload_size();
        let open = self
            .streams
            .iter()
            .filter(|(_, entry)| entry.parked)
            .map(|(&id, _)| id);
        let known = open
            .chain(self.held_fins.streams())
            .chain(self.finished.ids());
        let conn = &mut self.conn;
        known.into_iter().any(|id| {
            conn.stream_capacity(id)
                .is_ok_and(|capacity| capacity >= packet)
        })
    }
}

/// What working around quiche's lossy-path bugs cost a connection so far:
/// [`QuicConnection::loss_workarounds`](super::QuicConnection::loss_workarounds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LossWorkarounds {
    /// Times every send stream was parked, after a loss or a probe timeout.
    pub park_sweeps: u64,
    /// Streams parked now (open, with a held FIN, or finished and still in quiche).
    pub parked_streams: usize,
    /// `send` calls made past parked streams after quiche said it had nothing to send:
    /// once per parked stream per flush after a sweep, until a round finds nothing
    /// behind them.
    pub sends_past_parked: u64,
    /// Times every send stream was parked because quiche kept bytes it had room to send
    /// a probe timeout long (a stuck stream heading its queue with no loss since the last
    /// sweep: `stall.rs`).
    pub kept_bytes_sweeps: u64,
    /// FINs held until the bytes before them were acknowledged (`fins.rs`).
    pub fins_held: u64,
    /// Probes sent on paths the peer left (one per path, and one more each time a probe
    /// was lost), so that what was in flight on them is declared lost and sent again
    /// (`migration.rs`).
    pub paths_left_probed: u64,
    /// Challenges asked for again on a new path whose validation stalled (`migration.rs`).
    pub new_paths_revalidated: u64,
    /// New paths quiche gave up on (every challenge lost) and validated again when the
    /// peer sent from them (`migration.rs`).
    pub failed_paths_revived: u64,
    /// Times quiche's timers gave the active path up and it fell back to an older one;
    /// meanwhile what it sends goes where the peer was last seen (`migration.rs`).
    pub fallbacks: u64,
    /// Times the datagram carrying our CONNECTION_CLOSE was sent again, the peer still
    /// sending after it (`closing.rs`).
    pub closes_resent: u32,
    /// Paths the peer left that quiche could no longer build a packet for (it kept a
    /// connection ID there that the peer retired), sent around since (`unsendable.rs`).
    pub unsendable_paths: u64,
}

/// The connection's loss recovery, as the held FINs read it (`fins.rs`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Recovery {
    /// Packets declared lost and probe timeouts fired, so far.
    pub(super) losses: usize,
    /// How many times quiche's probe timeout is backed off: probe timeouts since the last
    /// acknowledgement of new bytes.
    pub(super) probe_backoff: u32,
    /// The peer acknowledged new bytes since the connection last lost packets or fired a
    /// probe timeout: what was lost got through, or is being declared lost.
    pub(super) acked_since_loss: bool,
}

/// The streams whose FIN is written and that quiche may still keep (some bytes, or the
/// FIN, not acknowledged yet), for the sweep to park and for FINs to be written again.
///
/// A stream is added once, when its FIN is written, and the list is pruned of the
/// streams quiche let go each time it doubles: what it holds stays near the streams with
/// bytes in flight, at an amortized cost of one lookup per stream (chat ends a stream per
/// message delivered, so nothing here may grow with history).
#[derive(Debug, Default)]
pub(super) struct FinishedStreams {
    /// Each stream, and whether it is parked.
    streams: Vec<(u64, bool)>,
    /// How many of them are parked.
    parked: usize,
    /// The length at which the list is next pruned.
    prune_at: usize,
}

/// The shortest list worth pruning.
const MIN_PRUNE_AT: usize = 64;

impl FinishedStreams {
    /// Notes that the FIN of stream `id` of `conn` is written.
    pub(super) fn add(&mut self, id: u64, conn: &mut quiche::Connection) {
        self.streams.push((id, false));
        if self.streams.len() < self.prune_at.max(MIN_PRUNE_AT) {
            return;
        }
        // quiche has a stream until every byte and the FIN are acknowledged (or it was
        // stopped, when nothing of it is sent any more): only those it still has stay.
        self.streams
            .retain(|&(id, _)| conn.stream_capacity(id).is_ok());
        self.parked = self.streams.iter().filter(|(_, parked)| *parked).count();
        self.prune_at = self.streams.len() * 2;
    }

    /// Parks every stream quiche still has, and forgets the others.
    fn park(&mut self, conn: &mut quiche::Connection) {
        self.streams.retain_mut(|(id, parked)| {
            *parked = conn.stream_capacity(*id).is_ok()
                && conn.stream_priority(*id, PARKED, true).is_ok();
            *parked
        });
        self.parked = self.streams.len();
    }

    /// Writes the FIN of every stream quiche still has again, which queues it to be sent
    /// where nothing else of the stream is queued.
    fn write_fins_again(&mut self, conn: &mut quiche::Connection) {
        for &(id, _) in &self.streams {
            let _ = conn.stream_send(id, &[], true);
        }
    }

    /// The streams it holds.
    fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.streams.iter().map(|&(id, _)| id)
    }

    /// How many streams the list holds.
    pub(super) fn len(&self) -> usize {
        self.streams.len()
    }

    /// Whether it holds none.
    fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// How many of them are parked.
    pub(super) fn parked(&self) -> usize {
        self.parked
    }
}

impl super::QuicConnection {
    /// What working around quiche's lossy-path and migration bugs cost this connection so
    /// far (`quic/parking.rs`, `quic/fins.rs`, `quic/migration.rs`): for diagnostics, and
    /// for the tests that keep those costs bounded.
    pub fn loss_workarounds(&self) -> LossWorkarounds {
        let state = self.shared.state.lock();
        LossWorkarounds {
            park_sweeps: state.park_sweeps,
            parked_streams: state.open_parked + state.held_fins.len() + state.finished.parked(),
            sends_past_parked: state.sends_past_parked,
            kept_bytes_sweeps: state.kept.sweeps(),
            fins_held: state.held_fins.total(),
            paths_left_probed: state.migrations.probed(),
            new_paths_revalidated: state.migrations.revalidations(),
            failed_paths_revived: state.migrations.revived(),
            fallbacks: state.migrations.fallbacks(),
            closes_resent: state.closes_resent(),
            unsendable_paths: state.unsendable.found(),
        }
    }
}
