//! When to try a connection again: exponential backoff with jitter, as deployed relays
//! redial their peers and clients reconnect.
//!
//! The first retry waits [`Backoff::min`] (1 s by default), each failure doubles the
//! wait up to [`Backoff::max`] (10 s), and every wait is scaled by a random factor in
//! `[0.5, 1]`, so that clients cut off together (a relay restarted) do not all come back
//! in the same instant. A connection that lived at least [`Backoff::stable_after`]
//! (10 s) resets the schedule; a shorter one counts as a failure, so a peer that accepts
//! and at once drops (a redirect loop, a refusal after the handshake) is still backed
//! off.
//!
//! It reads no clock and holds no ambient randomness: the caller says how long each
//! connection lived, and seeds the jitter.
//!
//! ```
//! use std::time::Duration;
//! use moqx_net::backoff::Backoff;
//!
//! let mut backoff = Backoff::new(7);
//! let first = backoff.failed();
//! assert!(first >= Duration::from_millis(500) && first <= Duration::from_secs(1));
//! let second = backoff.failed();
//! assert!(second >= Duration::from_secs(1) && second <= Duration::from_secs(2));
//! // A connection that stayed up a minute: the next retry is quick again.
//! let again = backoff.ended(Duration::from_secs(60));
//! assert!(again <= Duration::from_secs(1));
//! ```

use std::time::Duration;

/// A retry schedule (see the module docs).
#[derive(Debug, Clone)]
pub struct Backoff {
    /// The first wait, before jitter.
    pub min: Duration,
    /// The longest wait, before jitter.
    pub max: Duration,
    /// A connection that lived this long resets the schedule.
    pub stable_after: Duration,
    /// The next wait, before jitter.
    next: Duration,
    /// The jitter generator's state (splitmix64).
    state: u64,
}

impl Backoff {
    /// 1 s doubling to 10 s, reset by a connection that lived 10 s; `seed` drives the
    /// jitter (give each dialer its own, from any entropy).
    pub fn new(seed: u64) -> Self {
        Self::with_limits(Duration::from_secs(1), Duration::from_secs(10), seed)
    }

    /// `min` doubling to `max`, reset by a connection that lived 10 s.
    pub fn with_limits(min: Duration, max: Duration, seed: u64) -> Self {
        Self {
            min,
            max: max.max(min),
            stable_after: Duration::from_secs(10),
            next: min,
            state: seed,
        }
    }

    /// A connection attempt failed: how long to wait before the next.
    pub fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.max);
        self.jitter(wait)
    }

    /// A connection ended after living `lived`: how long to wait before the next. A
    /// stable one resets the schedule; a short one counts as a failure.
    pub fn ended(&mut self, lived: Duration) -> Duration {
        if lived >= self.stable_after {
            self.next = self.min;
        }
        self.failed()
    }

    /// Forgets past failures: the next wait is [`min`](Self::min) again.
    pub fn reset(&mut self) {
        self.next = self.min;
    }

    /// `wait` scaled by a factor in `[0.5, 1]`.
    fn jitter(&mut self, wait: Duration) -> Duration {
        // splitmix64: a well-mixed 64-bit sequence from any seed, in three lines.
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let unit = (z >> 11) as f64 / (1u64 << 53) as f64;
        wait.mul_f64(0.5 + unit / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_to_the_ceiling_within_their_jitter() {
        let mut backoff = Backoff::new(1);
        let mut ceiling = Duration::from_secs(1);
        for _ in 0..8 {
            let wait = backoff.failed();
            assert!(
                wait >= ceiling / 2 && wait <= ceiling,
                "{wait:?} {ceiling:?}"
            );
            ceiling = (ceiling * 2).min(Duration::from_secs(10));
        }
        assert_eq!(ceiling, Duration::from_secs(10));
    }

    #[test]
    fn a_short_connection_backs_off_and_a_stable_one_resets() {
        let mut backoff = Backoff::new(2);
        for _ in 0..5 {
            backoff.failed();
        }
        let short = backoff.ended(Duration::from_secs(2));
        assert!(short >= Duration::from_secs(5), "{short:?}");
        let stable = backoff.ended(Duration::from_secs(10));
        assert!(stable <= Duration::from_secs(1), "{stable:?}");
    }

    #[test]
    fn the_jitter_spreads_dialers_apart() {
        let waits: std::collections::HashSet<Duration> =
            (0..32).map(|seed| Backoff::new(seed).failed()).collect();
        assert!(waits.len() > 24, "{} distinct waits", waits.len());
    }
}
