//! A peer that moved to a new address (a NAT that rebinds, a client that migrates), and
//! the data quiche strands on the path it left.
//!
//! Why: quiche (up to at least 0.30, cloudflare/quiche#2452) keeps each path's sent
//! packets in that path's own loss recovery, and declares a packet lost only on an
//! acknowledgement of a later packet *of the same path*. A server sends nothing more on
//! the path its peer left, so what was in flight there when the peer moved (lost, when a
//! NAT rebinds: the old mapping is gone) is never declared lost; the old path's probe
//! timeout resends the frames of its two oldest packets, again and again, and the rest
//! never. A stream with a hole there never completes: a media subscriber behind a NAT
//! that rebinds stalled for good at its first rebinding, its connection otherwise
//! healthy (`moq-bench soak --rebind-seconds`, `tests/migration.rs`).
//!
//! What is done about it: once quiche has validated the peer's new address and moved
//! the connection there (`PathEvent::PeerMigrated`), the path left is probed (quiche
//! sends a PATH_CHALLENGE on it), and packets quiche addresses to a path left go to the
//! peer's current address instead. The peer acknowledges the probe, and quiche counts
//! that acknowledgement on the old path: everything in flight there before it is
//! declared lost, and sent again on the new path. The redirection sends nothing to an
//! address that has not shown it is the peer's (quiche validated the new path before it
//! moved), and it is bounded: the last [`MOST_PATHS_LEFT`] paths are remembered.
//!
//! A probe can be lost too, and quiche then gives the old path up at once (a server
//! path's anti-amplification credit, spent long ago, is below a probe's size): the path
//! is marked failed, and quiche probes it no more. A path left that quiche marked failed
//! is probed again, up to [`MOST_PROBES`] times, each time [`PROBE_AGAIN_AFTER`] later
//! than the last, doubled: only a path quiche marked *failed*, not one whose probe is
//! still in flight (under validation), and never faster than a probe can be answered.
//! Both once went wrong together: every path left counted as failed while its probe was
//! in flight, and was probed again at each of the connection's timers, every few
//! milliseconds; every challenge added is one more that quiche counts lost when the
//! path's timer fires, and within 40 ms every path left had failed. quiche then gave the
//! active path up too, found no path to fall back to, and closed the connection without
//! a word (two chat members of the 2-hour soak).
//!
//! A new path's validation can stall as well. A server may send on a path it has not
//! validated only three times what it received there, so its PATH_CHALLENGE is padded to
//! that credit; if it is lost, quiche sends the next one only at the new path's probe
//! timeout, which nothing may arm (the path has no RTT sample), while every packet the
//! peer sends from there is answered within the credit and carries no challenge. A peer
//! that only sends small packets (a chat member, a receiving client's PINGs) then stays
//! on an unvalidated path for good: nothing but those few bytes reaches it. So a packet
//! from a path under validation asks quiche for another challenge, at most once per
//! [`REVALIDATE_EVERY`] (RFC 9000 §8.2.1: no more often than an Initial would be resent).
//!
//! And quiche can give the peer's path up. Each time a path's loss-detection timer fires,
//! quiche counts every challenge sent on it before then as a lost probe, and a server
//! fails a path that lost a probe once its anti-amplification credit is under a probe's
//! size, which is always the case after a challenge (padded to the credit). So a new
//! path fails when its timer fires with every challenge lost, and so does a path already
//! validated when one challenge was answered and another was still in flight: quiche
//! keeps the other, and the path's next timer (a tail loss, a probe timeout: any, under
//! loss) fails the validated, active path. quiche then falls back to an older validated
//! path (the dead mapping the peer left), and the peer's next packet from its address
//! makes quiche take the failed path as the active one, with no working path left: every
//! packet after it is refused (`InvalidState`, and the connection closes with a protocol
//! violation). So a packet from a path quiche gave up on asks for a challenge there, and
//! what quiche has to send is put into packets right after that packet is received,
//! before the next one: the challenge sent marks the path as under validation again.
//! quiche tells of a path's failure once; a revived path fails again as easily (its next
//! timer counts the new challenge lost if the answer has not come yet), so after the
//! connection's timers run, the revived paths are looked at, and one marked failed
//! again is revived again by the peer's next packet.
//!
//! The path quiche gives up on can also be one the peer has just left: a NAT rebinding
//! loses what was sent there, the path's timer fires, and a challenge still in flight
//! fails it, so quiche falls back at the moment the peer moved; or the peer's new path
//! fails its first challenge, and quiche falls back from there. Either way quiche is
//! then on a path the peer left long ago, and what was in flight on the path given up on
//! is as stranded as on any path left: quiche resends from it only the frames of two
//! packets a probe timeout, backed off, seconds late (a chat reader passed over a
//! message after a rebinding in the soak). A fallback comes from quiche's timers, a move
//! of the peer's from a packet, which is how they are told apart: after a fallback the
//! paths given up on are remembered and nothing is probed (a probe would go to the
//! address quiche fell back to, which the peer is not at: the soak spent every probe of
//! a path left that way); the peer's next move makes each path it is not on a path left,
//! probed afresh.
//!
//! quiche gives a validated path up on a challenge it counts lost, and falls back to a
//! path the peer left long ago, while the peer is still where it was: a challenge
//! answered in a packet that was lost, the packet carrying it acknowledged all the same,
//! stays in flight in quiche's eyes until the path's next loss-detection timer (any loss,
//! seconds later), which then fails the path (a probe of a path left, a second challenge
//! of a validation). Sent to the address quiche fell back to, nothing reaches the peer;
//! and if quiche gives that path up too (its own old probe counted lost the same way), it
//! has no validated path left and closes the connection without a word. So while quiche
//! is fallen back, what it sends on the path it fell back to goes where the peer was last
//! seen: the peer acknowledges it from there, and its first packet revives the path. That
//! path is challenged again at once too: the peer answers a challenge without the delay
//! it may give an acknowledgement, and a path validated again is one quiche can take
//! should it give up the one it fell back to before the peer's packet comes. A packet
//! from the path quiche fell back to shows the peer is there after all.
//!
//! Remove once quiche declares such packets lost itself (cloudflare/quiche#2454) and
//! retries a lost challenge on its own.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The least time between two requests for another challenge on a path under validation.
pub(super) const REVALIDATE_EVERY: Duration = Duration::from_millis(100);

/// The most challenges asked for on one new path.
const MOST_REVALIDATIONS: u8 = 20;

/// How many paths left are remembered for redirection: quiche keeps at most as many
/// paths as the connection IDs it holds (`active_connection_id_limit`, a handful), and a
/// path left earlier has had its probe answered or failed long since.
pub(super) const MOST_PATHS_LEFT: usize = 4;

/// How many times a path left is probed: the first probe, and again each time quiche
/// marked the path failed (its probe lost). Each probe is lost with the path's loss rate,
/// so a handful makes a path whose data stays stranded vanishingly rare.
pub(super) const MOST_PROBES: u8 = 6;

/// The least time between a path left's first probe and its second, doubled for each
/// further one (0.1, 0.2, 0.4, 0.8 and 1.6 s: the last probe 3.1 s after the first).
/// quiche may count a challenge lost as soon as the path's loss-detection timer fires,
/// an RTT or less after it was sent, so the wait is what gives each probe time to be
/// answered on a path of a few hundred milliseconds.
pub(super) const PROBE_AGAIN_AFTER: Duration = Duration::from_millis(100);

/// A path the peer left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LeftPath {
    /// (local address, peer address).
    path: (SocketAddr, SocketAddr),
    /// Probes sent on it so far.
    probes: u8,
    /// When the last probe was seen sent: the first of the connection's timers after it
    /// ([`Migrations::take_paths_to_probe_again`] reads the time; a path event does not).
    probed_at: Option<Instant>,
}

impl LeftPath {
    /// A path left, probed once.
    fn probed_once(path: (SocketAddr, SocketAddr)) -> Self {
        Self {
            path,
            probes: 1,
            probed_at: None,
        }
    }

    /// Whether it may be probed again at `now`: fewer than [`MOST_PROBES`] so far, and
    /// the last one old enough.
    fn due(&self, now: Instant) -> bool {
        let Some(probed_at) = self.probed_at else {
            return false;
        };
        let wait = PROBE_AGAIN_AFTER * (1u32 << (self.probes.saturating_sub(1)).min(15));
        self.probes < MOST_PROBES && now >= probed_at + wait
    }
}

/// The connection's active path: the one it sends on (another than the first after a
/// migration; the first while quiche has none active, as a closed connection may).
pub(super) fn active_path(conn: &quiche::Connection) -> Option<quiche::PathStats> {
    conn.path_stats()
        .find(|path| path.active)
        .or_else(|| conn.path_stats().next())
}

/// One connection's path, and the paths its peer left.
#[derive(Debug, Default)]
pub(super) struct Migrations {
    /// The path packets go on: (local address, peer address).
    active: Option<(SocketAddr, SocketAddr)>,
    /// Paths the peer left, the most recent last: packets quiche addresses to one of
    /// them go to the active path's peer address.
    left: Vec<LeftPath>,
    /// Probes sent on paths left (so that their stranded packets are declared lost).
    probed: u64,
    /// The newest path quiche saw and has not validated yet, when another challenge was
    /// last asked for on it, and how many were.
    validating: Option<((SocketAddr, SocketAddr), Option<Instant>, u8)>,
    /// Challenges asked for again on new paths.
    revalidations: u64,
    /// Paths quiche gave up on, the most recent last: the peer may still be at one (its
    /// newest, or the active one).
    failed: Vec<(SocketAddr, SocketAddr)>,
    /// The paths the connection was on when quiche's timers gave them up and it fell
    /// back to an older one, until the peer shows where it is: back at one (revived), at
    /// the path quiche fell back to, or at a new address. Then each one it is not at is a
    /// path left, to probe.
    stranded: Vec<(SocketAddr, SocketAddr)>,
    /// Where the peer was last seen while quiche is fallen back: the path the connection
    /// was on at the first fallback since the peer last showed where it is. What quiche
    /// sends meanwhile goes there (see [`redirect`](Self::redirect)).
    last_seen: Option<(SocketAddr, SocketAddr)>,
    /// Times quiche's timers gave the active path up and it fell back to an older one.
    fallbacks: u64,
    /// Times the peer moved to a new address and quiche followed it there.
    moves: u64,
    /// Paths quiche gave up on and validated again, as the peer sent from them.
    revived: u64,
    /// The paths revived so far, the most recent last: quiche tells of a path's failure
    /// once (`PathEvent::FailedValidation`), so a revived path that fails again must be
    /// looked for ([`watched`](Self::watched)).
    revived_paths: Vec<(SocketAddr, SocketAddr)>,
}

impl Migrations {
    /// Starts on `active`, the connection's path when it was made.
    pub(super) fn new(active: Option<(SocketAddr, SocketAddr)>) -> Self {
        Self {
            active,
            ..Self::default()
        }
    }

    /// quiche moved the connection to (`local`, `peer`), a validated path; returns the
    /// paths left, to probe.
    ///
    /// `fallback`: quiche moved on its own, its timers having given the active path up
    /// (a move of the peer's is seen in a packet). The peer is not at the path quiche
    /// fell back to (one it left earlier) and, where it is, only its next packet tells:
    /// the paths it may have left data stranded on wait for that, and nothing is probed
    /// in the meantime (a probe would go to an address the peer is not at). The peer's
    /// next move, back to the path given up on (revived) or to a new address, makes
    /// every path it is not on a path left, probed afresh.
    pub(super) fn on_peer_migrated(
        &mut self,
        local: SocketAddr,
        peer: SocketAddr,
        fallback: bool,
    ) -> Vec<(SocketAddr, SocketAddr)> {
        let now = (local, peer);
        let Some(before) = self.active.replace(now) else {
            return Vec::new();
        };
        if fallback {
            self.fallbacks += 1;
            if before != now && !self.stranded.contains(&before) {
                if self.stranded.is_empty() {
                    self.last_seen = Some(before);
                }
                if self.stranded.len() == MOST_PATHS_LEFT {
                    self.stranded.remove(0);
                }
                self.stranded.push(before);
            }
            return Vec::new();
        }
        self.last_seen = None;
        if before != now {
            self.moves += 1;
        }
        // Back on a path left earlier: packets for it go there again.
        self.left.retain(|left| left.path != now);
        let fell_back = !self.stranded.is_empty();
        let mut moved_from: Vec<_> = std::mem::take(&mut self.stranded);
        if !moved_from.contains(&before) {
            moved_from.push(before);
        }
        moved_from.retain(|path| *path != now);
        let mut probe = Vec::new();
        if fell_back {
            // Probes sent before quiche fell back may have been lost with the peer's
            // old address: every path left is probed again, its count started afresh.
            for left in &mut self.left {
                *left = LeftPath::probed_once(left.path);
                probe.push(left.path);
            }
        }
        for path in moved_from {
            self.left.retain(|left| left.path != path);
            if self.left.len() == MOST_PATHS_LEFT {
                self.left.remove(0);
            }
            self.left.push(LeftPath::probed_once(path));
            if !probe.contains(&path) {
                probe.push(path);
            }
        }
        self.probed += probe.len() as u64;
        probe
    }

    /// A packet from `from` to `to` was received: if quiche had fallen back and the packet
    /// comes from the path it fell back to, the peer is there after all (a move of the
    /// peer's that quiche does not tell of, being on that path already). Returns the
    /// paths left, to probe, as [`on_peer_migrated`](Self::on_peer_migrated) does.
    /// Cheap unless quiche is fallen back: called for every packet.
    pub(super) fn on_packet(
        &mut self,
        from: SocketAddr,
        to: SocketAddr,
    ) -> Vec<(SocketAddr, SocketAddr)> {
        if self.stranded.is_empty() || self.active != Some((to, from)) {
            return Vec::new();
        }
        self.on_peer_migrated(to, from, false)
    }

    /// Where the peer was last seen, while quiche is fallen back.
    pub(super) fn last_seen(&self) -> Option<(SocketAddr, SocketAddr)> {
        self.last_seen
    }

    /// Times quiche's timers gave the active path up and it fell back to an older one.
    pub(super) fn fallbacks(&self) -> u64 {
        self.fallbacks
    }

    /// Times the peer moved to a new address and quiche followed it there (a return to
    /// a path quiche had fallen back from counts as one).
    pub(super) fn moves(&self) -> u64 {
        self.moves
    }

    /// quiche saw packets on a new path (`PathEvent::New`): it is under validation.
    pub(super) fn on_new_path(&mut self, local: SocketAddr, peer: SocketAddr) {
        self.validating = Some(((local, peer), None, 0));
    }

    /// quiche validated a path (`PathEvent::Validated`).
    pub(super) fn on_validated(&mut self, local: SocketAddr, peer: SocketAddr) {
        if self
            .validating
            .is_some_and(|(path, ..)| path == (local, peer))
        {
            self.validating = None;
        }
        self.failed.retain(|path| *path != (local, peer));
    }

    /// quiche gave up on a path (`PathEvent::FailedValidation`): the peer may still be
    /// there (its newest path, or even the validated active one: see the module's
    /// documentation), and its next packet from there revives it
    /// ([`revive`](Self::revive)). Whether the path is newly failed (not already
    /// waiting to be revived).
    pub(super) fn on_validation_failed(&mut self, local: SocketAddr, peer: SocketAddr) -> bool {
        let path = (local, peer);
        if self
            .validating
            .is_some_and(|(validating, ..)| validating == path)
        {
            self.validating = None;
        }
        if self.failed.contains(&path) {
            return false;
        }
        if self.failed.len() == MOST_PATHS_LEFT {
            self.failed.remove(0);
        }
        self.failed.push(path);
        true
    }

    /// A packet from `from` to `to` is about to be received: whether it comes from a path
    /// quiche gave up on, so that quiche must send a challenge there before it receives
    /// another (quiche makes a failed path the active one on the peer's next packet from
    /// it, and refuses every packet after it while no active path works). The path is
    /// under validation again. Not a path the peer left: a packet late from there (one
    /// the old mapping still carried) must not end the redirection of what is stranded
    /// on it.
    pub(super) fn revive(&mut self, from: SocketAddr, to: SocketAddr) -> bool {
        let path = (to, from);
        let Some(index) = self.failed.iter().position(|failed| *failed == path) else {
            return false;
        };
        if self.left.iter().any(|left| left.path == path) {
            return false;
        }
        self.failed.remove(index);
        self.validating = Some((path, None, 0));
        self.revived += 1;
        if !self.revived_paths.contains(&path) {
            if self.revived_paths.len() == MOST_PATHS_LEFT {
                self.revived_paths.remove(0);
            }
            self.revived_paths.push(path);
        }
        true
    }

    /// The revived paths, whose next failure quiche does not tell of: after the
    /// connection's timers ran, each one quiche marks failed goes to
    /// [`on_validation_failed`](Self::on_validation_failed) again.
    pub(super) fn watched(&self) -> &[(SocketAddr, SocketAddr)] {
        &self.revived_paths
    }

    /// Paths quiche gave up on and validated again so far.
    pub(super) fn revived(&self) -> u64 {
        self.revived
    }

    /// A packet from `from` to `to` arrived (`now` reads the clock, only for a packet
    /// from a path under validation: not once per packet): whether to ask quiche for
    /// another challenge on that path (the last ask is old enough).
    pub(super) fn revalidate(
        &mut self,
        from: SocketAddr,
        to: SocketAddr,
        now: impl FnOnce() -> Instant,
    ) -> bool {
        let Some((path, asked, count)) = &mut self.validating else {
            return false;
        };
        if *path != (to, from) || *count >= MOST_REVALIDATIONS {
            return false;
        }
        let now = now();
        if asked.is_some_and(|at| now < at + REVALIDATE_EVERY) {
            return false;
        }
        // The first packet is the one quiche answers with its own challenge.
        let first = asked.is_none();
        *asked = Some(now);
        if first {
            return false;
        }
        *count += 1;
        self.revalidations += 1;
        true
    }

    /// Challenges asked for again on new paths so far.
    pub(super) fn revalidations(&self) -> u64 {
        self.revalidations
    }

    /// After the connection's timers ran at `now`: the paths left to probe again, those
    /// quiche gave up on (`failed`: quiche marked them failed, their probe lost; not one
    /// under validation, whose probe may still be answered), each at most
    /// [`MOST_PROBES`] times in all and [`PROBE_AGAIN_AFTER`], doubled, after the last.
    pub(super) fn take_paths_to_probe_again(
        &mut self,
        now: Instant,
        mut failed: impl FnMut((SocketAddr, SocketAddr)) -> bool,
    ) -> Vec<(SocketAddr, SocketAddr)> {
        let mut again = Vec::new();
        if !self.stranded.is_empty() {
            // quiche fell back to a path the peer is not at: a probe now would be lost.
            return again;
        }
        for left in &mut self.left {
            if left.probed_at.is_none() {
                // The first look since the probe was asked for: it has left by now.
                left.probed_at = Some(now);
            } else if left.due(now) && failed(left.path) {
                left.probes += 1;
                left.probed_at = Some(now);
                self.probed += 1;
                again.push(left.path);
            }
        }
        again
    }

    /// Whether a path left may still be probed again (cheap: nothing to ask quiche
    /// otherwise).
    pub(super) fn may_probe_again(&self) -> bool {
        self.left.iter().any(|left| left.probes < MOST_PROBES)
    }

    /// Sends `info`'s packet to the peer's current address if quiche addressed it to a
    /// path the peer left; and while quiche is fallen back, what it sends on the path it
    /// fell back to goes where the peer was last seen.
    ///
    /// Why the latter: quiche gives a validated path up on a challenge it counts lost
    /// (see the module's documentation) while the peer is still there, and falls back to
    /// an address the peer left long ago. Sent there, nothing reaches the peer, which may
    /// then say nothing (a client that only receives); and if quiche gives the path it
    /// fell back to up too (a challenge of an old probe of it, also counted lost), it has
    /// no validated path left and closes the connection without a word: a chat member of
    /// the rebinding soak met a stateless reset. Sent where the peer was last seen, the
    /// packets reach it, its acknowledgements come back from that path, and the first of
    /// them revives it ([`revive`](Self::revive)): the connection is back there within a
    /// round trip. The address is one quiche validated: it was the active path.
    pub(super) fn redirect(&self, info: &mut quiche::SendInfo) {
        let Some((local, peer)) = self.last_seen.or(self.active) else {
            return;
        };
        let addressed = (info.from, info.to);
        if addressed == (local, peer) {
            return;
        }
        let stale = self.left.iter().any(|left| left.path == addressed)
            || (self.last_seen.is_some() && self.active == Some(addressed));
        if stale {
            tracing::trace!(addressed = %info.to, %peer, "a packet for a path the peer is not on goes to its address");
            info.from = local;
            info.to = peer;
        }
    }

    /// Probes sent on paths left so far.
    pub(super) fn probed(&self) -> u64 {
        self.probed
    }
}

#[cfg(test)]
mod tests;
