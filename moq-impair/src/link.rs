//! The fate of each packet: one direction of one flow decides, from its seeded random
//! generator, whether a packet is lost, when it leaves, and whether it is duplicated or
//! corrupted. No I/O and no clock: the caller says what time it is.

use std::time::{Duration, Instant};

use crate::Impairment;

/// Why a packet never arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drop {
    /// Random (or burst) loss.
    Lost,
    /// Larger than the path MTU.
    TooBig,
    /// The bottleneck's queue was full.
    Overflow,
    /// The path is a black hole.
    Blackhole,
}

/// What happens to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// It never arrives.
    Dropped(Drop),
    /// It arrives at `at`.
    Delivered {
        /// When it leaves the link.
        at: Instant,
        /// Whether it was held back so that later packets overtake it.
        reordered: bool,
        /// The bit to flip (an index into the packet's bits), if it is corrupted.
        corrupt_bit: Option<usize>,
        /// Whether a second copy arrives with it.
        duplicated: bool,
    },
}

/// The longest silence a burst of losses lasts through: a packet that reaches a link
/// later than this after the one before it finds any burst over.
pub const BURST_SPAN: Duration = Duration::from_millis(50);

/// The longest gap between two packets that counts them in one sending burst
/// ([`Link::sending_burst`]): a full-size packet every 100 µs is 100 Mbit/s.
pub const BACK_TO_BACK: Duration = Duration::from_micros(100);

/// A bottleneck shared by every flow crossing the link in one direction: it sends one
/// packet at a time at the link's rate.
#[derive(Debug, Default)]
pub struct Bottleneck {
    /// When the bottleneck finishes sending what it holds.
    free_at: Option<Instant>,
}

/// One direction of one flow: its random generator and the state its decisions carry
/// from packet to packet.
#[derive(Debug)]
pub struct Link {
    rng: fastrand::Rng,
    /// In a burst of losses (Gilbert-Elliott's bad state).
    in_burst: bool,
    /// When the last packet reached the link: a burst of losses does not outlast a
    /// silence of [`BURST_SPAN`].
    last_arrival: Option<Instant>,
    /// Packets that reached the link back to back, the last one included: see
    /// [`Link::sending_burst`].
    run: u64,
    /// When the last packet not held back for reordering leaves: jitter never makes a
    /// packet overtake it.
    last_release: Option<Instant>,
}

impl Link {
    /// A link whose decisions follow from `seed` alone.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: fastrand::Rng::with_seed(seed),
            in_burst: false,
            last_arrival: None,
            run: 0,
            last_release: None,
        }
    }

    /// Decides the fate of a packet of `ip_bytes` (its size as an IP packet: the UDP
    /// payload plus the IP and UDP headers) that reached the link at `now`.
    pub fn decide(
        &mut self,
        impairment: &Impairment,
        bottleneck: &mut Bottleneck,
        now: Instant,
        ip_bytes: usize,
    ) -> Fate {
        let gap = self
            .last_arrival
            .replace(now)
            .map(|last| now.saturating_duration_since(last));
        self.run = match gap {
            Some(gap) if gap <= BACK_TO_BACK => self.run + 1,
            _ => 1,
        };
        if impairment.blackhole {
            return Fate::Dropped(Drop::Blackhole);
        }
        if impairment.mtu.is_some_and(|mtu| ip_bytes > mtu) {
            return Fate::Dropped(Drop::TooBig);
        }
        if self.lost(impairment, gap.is_some_and(|gap| gap > BURST_SPAN)) {
            return Fate::Dropped(Drop::Lost);
        }
        let mut at = now;
        if let Some(rate) = impairment.rate {
            let start = bottleneck.free_at.map_or(now, |free| free.max(now));
            if start.duration_since(now) > impairment.queue {
                return Fate::Dropped(Drop::Overflow);
            }
            let bits = ip_bytes as f64 * 8.0;
            let done = start + Duration::from_secs_f64(bits / rate as f64);
            bottleneck.free_at = Some(done);
            at = done;
        }
        at += self.delay(impairment);
        if let Some(last) = self.last_release {
            at = at.max(last);
        }
        let reordered = impairment.reorder > 0.0 && self.rng.f64() < impairment.reorder;
        if reordered {
            at += impairment.reorder_delay;
        } else {
            self.last_release = Some(at);
        }
        let corrupt_bit = (impairment.corrupt > 0.0 && self.rng.f64() < impairment.corrupt)
            .then(|| self.rng.usize(..ip_bytes.max(1) * 8));
        let duplicated = impairment.duplicate > 0.0 && self.rng.f64() < impairment.duplicate;
        Fate::Delivered {
            at,
            reordered,
            corrupt_bit,
            duplicated,
        }
    }

    /// Whether this packet (`after_silence`: the flow was silent for [`BURST_SPAN`] before
    /// it) is lost: independently, or in bursts of
    /// mean length `burst` with the same average (Gilbert-Elliott: the bad state loses
    /// every packet, and is entered with probability p and left with probability r, where
    /// r = 1 / burst and p / (p + r) = loss).
    ///
    /// A burst is a run of packets lost close together in time (a queue overflowing, a
    /// radio fading): a packet that comes more than [`BURST_SPAN`] after the one before
    /// it finds the burst over. Counted in packets alone, a burst on a sparse flow lasts
    /// as long as the flow's silences: a connection whose retransmissions back off
    /// exponentially (RFC 9002: a handshake's or a lone request's probes, 1 s, 2 s, 4 s
    /// apart) then loses each of them with the burst's odds of going on, and a path with
    /// 5 % loss in bursts of 4 stalled a WebTransport handshake for longer than 10 s in
    /// one connection of a few dozen, which no network with that loss does.
    fn lost(&mut self, impairment: &Impairment, after_silence: bool) -> bool {
        if impairment.loss <= 0.0 || after_silence {
            self.in_burst = false;
        }
        if impairment.loss <= 0.0 {
            return false;
        }
        if impairment.burst <= 1.0 {
            return self.rng.f64() < impairment.loss;
        }
        let leave = 1.0 / impairment.burst;
        let enter = impairment.loss * leave / (1.0 - impairment.loss);
        let draw = self.rng.f64();
        self.in_burst = if self.in_burst {
            draw >= leave
        } else {
            draw < enter
        };
        self.in_burst
    }

    /// How many packets the sender put on this link back to back (each within
    /// [`BACK_TO_BACK`] of the one before), the last one decided included: the size of
    /// the burst it is part of so far. A sender that paces keeps it small; one that sends
    /// a window at once makes it the window.
    pub fn sending_burst(&self) -> u64 {
        self.run
    }

    /// This packet's delay: uniform within `delay ± jitter`.
    fn delay(&mut self, impairment: &Impairment) -> Duration {
        if impairment.jitter.is_zero() {
            return impairment.delay;
        }
        let low = impairment.delay.saturating_sub(impairment.jitter);
        let span = impairment.delay + impairment.jitter - low;
        low + span.mul_f64(self.rng.f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fates(impairment: &Impairment, seed: u64, packets: usize) -> Vec<Fate> {
        let mut link = Link::new(seed);
        let mut bottleneck = Bottleneck::default();
        let start = Instant::now();
        (0..packets)
            .map(|i| {
                let now = start + Duration::from_micros(i as u64 * 100);
                link.decide(impairment, &mut bottleneck, now, 1200)
            })
            .collect()
    }

    fn lost(fates: &[Fate]) -> usize {
        fates
            .iter()
            .filter(|fate| matches!(fate, Fate::Dropped(Drop::Lost)))
            .count()
    }

    #[test]
    fn the_same_seed_decides_the_same_fates() {
        let impairment: Impairment =
            "loss=5%,reorder=5%,duplicate=5%,corrupt=5%,jitter=1ms,delay=5ms"
                .parse()
                .unwrap();
        let start = Instant::now();
        let run = |seed| {
            let mut link = Link::new(seed);
            let mut bottleneck = Bottleneck::default();
            (0..2000)
                .map(|i| {
                    let now = start + Duration::from_micros(i * 100);
                    match link.decide(&impairment, &mut bottleneck, now, 1200) {
                        Fate::Dropped(why) => format!("{why:?}"),
                        Fate::Delivered {
                            at,
                            reordered,
                            corrupt_bit,
                            duplicated,
                        } => format!(
                            "{:?} {reordered} {corrupt_bit:?} {duplicated}",
                            at.duration_since(start)
                        ),
                    }
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn independent_loss_averages_its_rate() {
        let fates = fates(&"loss=5%".parse().unwrap(), 1, 100_000);
        let rate = lost(&fates) as f64 / fates.len() as f64;
        assert!((0.045..0.055).contains(&rate), "{rate}");
    }

    #[test]
    fn burst_loss_keeps_the_average_and_lengthens_the_runs() {
        let fates = fates(&"loss=5%,burst=4".parse().unwrap(), 1, 200_000);
        let rate = lost(&fates) as f64 / fates.len() as f64;
        assert!((0.04..0.06).contains(&rate), "{rate}");
        let mut runs = Vec::new();
        let mut run = 0;
        for fate in &fates {
            if matches!(fate, Fate::Dropped(Drop::Lost)) {
                run += 1;
            } else if run > 0 {
                runs.push(run);
                run = 0;
            }
        }
        let mean = runs.iter().sum::<usize>() as f64 / runs.len() as f64;
        assert!((3.5..4.5).contains(&mean), "{mean}");
    }

    #[test]
    fn a_burst_does_not_outlast_a_silence() {
        // Bursts of 1,000 packets on average: once in one, a dense flow stays in it.
        let impairment: Impairment = "loss=90%,burst=1000".parse().unwrap();
        let mut link = Link::new(3);
        let mut bottleneck = Bottleneck::default();
        let mut now = Instant::now();
        let mut send = |link: &mut Link, after: Duration| {
            now += after;
            link.decide(&impairment, &mut bottleneck, now, 1200) == Fate::Dropped(Drop::Lost)
        };
        while !send(&mut link, Duration::from_micros(100)) {}
        let dense = (0..100)
            .filter(|_| send(&mut link, Duration::from_micros(100)))
            .count();
        assert!(dense >= 90, "{dense} of 100 lost in the burst");
        // Packets a second apart (a retransmission backing off) each start afresh: lost
        // with the odds of entering a burst (under 1 %), not of staying in one.
        let sparse = (0..100)
            .filter(|_| send(&mut link, Duration::from_secs(1)))
            .count();
        assert!(sparse <= 10, "{sparse} of 100 lost after silences");
    }

    #[test]
    fn packets_back_to_back_make_a_sending_burst() {
        let impairment = Impairment::default();
        let mut link = Link::new(1);
        let mut bottleneck = Bottleneck::default();
        let mut now = Instant::now();
        for expected in 1..=5 {
            link.decide(&impairment, &mut bottleneck, now, 1200);
            assert_eq!(link.sending_burst(), expected);
            now += BACK_TO_BACK;
        }
        now += BACK_TO_BACK;
        link.decide(&impairment, &mut bottleneck, now, 1200);
        assert_eq!(link.sending_burst(), 1, "paced: a new burst");
    }

    #[test]
    fn jitter_never_reorders_and_reordering_does() {
        let fates = fates(&"delay=10ms,jitter=5ms".parse().unwrap(), 3, 5_000);
        let times: Vec<Instant> = fates
            .iter()
            .map(|fate| match fate {
                Fate::Delivered { at, .. } => *at,
                Fate::Dropped(why) => panic!("dropped: {why:?}"),
            })
            .collect();
        assert!(times.windows(2).all(|pair| pair[0] <= pair[1]));

        let fates = self::fates(&"reorder=10%,reorder_delay=1ms".parse().unwrap(), 3, 5_000);
        let held = fates
            .iter()
            .filter(|fate| {
                matches!(
                    fate,
                    Fate::Delivered {
                        reordered: true,
                        ..
                    }
                )
            })
            .count();
        assert!((400..600).contains(&held), "{held}");
    }

    #[test]
    fn a_bottleneck_paces_and_drops_what_its_queue_cannot_hold() {
        // 1,200-byte packets every 100 µs is 96 Mbit/s into a 10 Mbit/s link that sends
        // one in 960 µs; the 10 ms queue holds about 10.
        let impairment: Impairment = "rate=10mbit,queue=10ms".parse().unwrap();
        let fates = fates(&impairment, 1, 1_000);
        let delivered: Vec<Instant> = fates
            .iter()
            .filter_map(|fate| match fate {
                Fate::Delivered { at, .. } => Some(*at),
                Fate::Dropped(_) => None,
            })
            .collect();
        let overflowed = fates
            .iter()
            .filter(|fate| matches!(fate, Fate::Dropped(Drop::Overflow)))
            .count();
        assert!(delivered.len() > 100 && overflowed > 800, "{overflowed}");
        for pair in delivered.windows(2) {
            assert_eq!(pair[1] - pair[0], Duration::from_micros(960));
        }
    }

    #[test]
    fn packets_over_the_mtu_and_into_a_black_hole_are_dropped() {
        let mut link = Link::new(1);
        let mut bottleneck = Bottleneck::default();
        let now = Instant::now();
        let mtu: Impairment = "mtu=1280".parse().unwrap();
        assert!(matches!(
            link.decide(&mtu, &mut bottleneck, now, 1280),
            Fate::Delivered { .. }
        ));
        assert_eq!(
            link.decide(&mtu, &mut bottleneck, now, 1281),
            Fate::Dropped(Drop::TooBig)
        );
        let dark: Impairment = "blackhole=true".parse().unwrap();
        assert_eq!(
            link.decide(&dark, &mut bottleneck, now, 100),
            Fate::Dropped(Drop::Blackhole)
        );
    }
}
