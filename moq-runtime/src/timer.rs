//! A hierarchical timing wheel: thousands of connection timeouts behind one park deadline.
//!
//! Every QUIC connection has a timeout that moves on almost every packet. Keeping one
//! kernel timer per connection, or a sorted tree re-balanced on every move, costs per
//! packet; a wheel makes setting, moving and cancelling a timer O(1), and the event loop
//! parks once per turn on [`TimerWheel::next_deadline`], then collects what expired with
//! [`TimerWheel::expire`].
//!
//! Six levels of 64 slots, with 1 ms resolution at the bottom: a timer lands in the level
//! whose slot width matches how far away it is, and moves down a level each time the wheel
//! reaches its slot, until it expires from the bottom level. Timers never fire early: a
//! deadline is rounded up to the next millisecond. The wheel spans 64^6 ms (about two
//! years); a later deadline waits in the top level's furthest unambiguous slot and is
//! placed again, with its true deadline, when the wheel reaches that slot.
//!
//! Written by hand because the wheel must be driven by the loop's own clock reading and
//! keyed by the loop's connection handles; the async runtimes' wheels are internal to them.

use std::time::Instant;

const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
const LEVELS: usize = 6;
/// The furthest a timer is placed, in ticks from the wheel's clock. One top-level slot
/// (2³⁰ ms) short of the wheel's span: a timer placed a whole span ahead would share the
/// top-level slot the clock is in, which then reads as due now; the wheel would take it
/// out and put it back in the same slot forever (review finding F3, an io_uring worker
/// spinning on a token that expires in three years).
const MAX_HOLD_TICKS: u64 =
    (1 << (SLOT_BITS as usize * LEVELS)) - (1 << (SLOT_BITS as usize * (LEVELS - 1))) - 1;

/// A timer's key: a small, dense index (a connection's slot in its endpoint, a deadline's
/// slot in its loop). The wheel keeps its timers in a table indexed by it, so that setting
/// a timer (after every packet) hashes nothing; the table is as long as the largest key
/// ever set.
pub trait WheelKey: Copy + Eq {
    /// The key's place in the table.
    fn index(self) -> usize;
}

impl WheelKey for usize {
    fn index(self) -> usize {
        self
    }
}

impl WheelKey for u32 {
    fn index(self) -> usize {
        self as usize
    }
}

impl WheelKey for u16 {
    fn index(self) -> usize {
        usize::from(self)
    }
}

/// Timers keyed by `K` (a connection handle), with millisecond resolution.
#[derive(Debug)]
pub struct TimerWheel<K> {
    origin: Instant,
    /// Ticks (milliseconds since `origin`) processed so far.
    elapsed: u64,
    levels: Vec<Level<K>>,
    /// Each key's timer, at the key's index.
    entries: Vec<Option<Entry>>,
    len: usize,
}

#[derive(Debug)]
struct Level<K> {
    slots: Vec<Vec<K>>,
    /// Bit `s` is set while slot `s` holds a timer.
    occupied: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The deadline, in ticks (it may lie beyond the slot it is in: see
    /// [`MAX_HOLD_TICKS`]).
    when: u64,
    level: usize,
    slot: usize,
    /// Position in the slot's vector.
    index: usize,
}

impl<K: WheelKey> TimerWheel<K> {
    /// An empty wheel whose clock starts at `now`.
    pub fn new(now: Instant) -> Self {
        Self {
            origin: now,
            elapsed: 0,
            levels: (0..LEVELS)
                .map(|_| Level {
                    slots: (0..SLOTS).map(|_| Vec::new()).collect(),
                    occupied: 0,
                })
                .collect(),
            entries: Vec::new(),
            len: 0,
        }
    }

    /// How many timers are set.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no timer is set.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets `key`'s timer to `at`, replacing any it had. A time already past expires on the
    /// next [`expire`](Self::expire).
    pub fn insert(&mut self, key: K, at: Instant) {
        let when = self.ticks_ceil(at).max(self.elapsed);
        // Most moves land on the tick the timer already has (a connection's timeout is
        // re-read after every packet): nothing to do then.
        if self.entry(key).is_some_and(|entry| entry.when == when) {
            return;
        }
        self.remove(key);
        self.place(key, when);
    }

    /// Cancels `key`'s timer; returns whether it had one.
    pub fn remove(&mut self, key: K) -> bool {
        let Some(entry) = self.take_entry(key) else {
            return false;
        };
        let level = &mut self.levels[entry.level];
        let slot = &mut level.slots[entry.slot];
        slot.swap_remove(entry.index);
        if let Some(&moved) = slot.get(entry.index)
            && let Some(moved) = self.entries.get_mut(moved.index()).and_then(Option::as_mut)
        {
            moved.index = entry.index;
        }
        if slot.is_empty() {
            level.occupied &= !(1 << entry.slot);
        }
        true
    }

    /// When the loop should wake next: the start of the earliest occupied slot, never after
    /// the earliest timer (it may be before it, for a timer in a coarse slot; waking then
    /// moves it down a level).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.next_slot()
            .map(|(_, _, tick)| self.origin + std::time::Duration::from_millis(tick))
    }

    /// Moves the wheel's clock to `now` and appends every timer that expired to `expired`.
    pub fn expire(&mut self, now: Instant, expired: &mut Vec<K>) {
        let target = self.ticks_floor(now);
        while let Some((level, slot, tick)) = self.next_slot() {
            if tick > target {
                break;
            }
            self.elapsed = self.elapsed.max(tick);
            let keys = std::mem::take(&mut self.levels[level].slots[slot]);
            self.levels[level].occupied &= !(1 << slot);
            for key in keys {
                let Some(entry) = self.take_entry(key) else {
                    continue;
                };
                if entry.when <= self.elapsed {
                    expired.push(key);
                } else {
                    // Down a level (or more), now that the wheel is this close to it; a
                    // far deadline held at the top level moves along it.
                    self.place(key, entry.when);
                    debug_assert!(
                        self.entry(key)
                            .is_none_or(|placed| (placed.level, placed.slot) != (level, slot)),
                        "a timer went back into the slot just taken: the wheel would spin"
                    );
                }
            }
        }
        self.elapsed = self.elapsed.max(target);
    }

    fn place(&mut self, key: K, when: u64) {
        let held = when.min(self.elapsed.saturating_add(MAX_HOLD_TICKS));
        let level = level_for(self.elapsed, held);
        let slot = ((held >> (SLOT_BITS as usize * level)) & (SLOTS as u64 - 1)) as usize;
        let slots = &mut self.levels[level];
        slots.slots[slot].push(key);
        slots.occupied |= 1 << slot;
        let index = slots.slots[slot].len() - 1;
        let at = key.index();
        if at >= self.entries.len() {
            self.entries.resize(at + 1, None);
        }
        if self.entries[at]
            .replace(Entry {
                when,
                level,
                slot,
                index,
            })
            .is_none()
        {
            self.len += 1;
        }
    }

    /// `key`'s timer, if it has one.
    fn entry(&self, key: K) -> Option<&Entry> {
        self.entries.get(key.index()).and_then(Option::as_ref)
    }

    /// Takes `key`'s timer out of the table (not out of its slot).
    fn take_entry(&mut self, key: K) -> Option<Entry> {
        let entry = self.entries.get_mut(key.index()).and_then(Option::take)?;
        self.len -= 1;
        Some(entry)
    }

    /// The earliest occupied slot: its level, index, and first tick. Timers at a lower level
    /// are always due before those at a higher one, so the lowest occupied level decides.
    fn next_slot(&self) -> Option<(usize, usize, u64)> {
        for (level, slots) in self.levels.iter().enumerate() {
            if slots.occupied == 0 {
                continue;
            }
            let shift = SLOT_BITS as usize * level;
            let position = ((self.elapsed >> shift) & (SLOTS as u64 - 1)) as u32;
            let distance = slots.occupied.rotate_right(position).trailing_zeros();
            let slot = (position + distance) as usize % SLOTS;
            let level_span = 1u64 << (shift + SLOT_BITS as usize);
            let level_start = self.elapsed & !(level_span - 1);
            let mut tick = level_start + ((slot as u64) << shift);
            if tick + (1 << shift) <= self.elapsed {
                tick += level_span; // the slot is in the next rotation
            }
            return Some((level, slot, tick.max(self.elapsed)));
        }
        None
    }

    /// Whole milliseconds from the origin to `at`, rounded up (in 64-bit arithmetic: the
    /// 128-bit division of `Duration::as_nanos` is a call of its own, on every timer set).
    fn ticks_ceil(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.origin);
        since
            .as_secs()
            .saturating_mul(1000)
            .saturating_add(u64::from(since.subsec_nanos().div_ceil(1_000_000)))
    }

    /// Whole milliseconds from the origin to `at`, rounded down.
    fn ticks_floor(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.origin);
        since
            .as_secs()
            .saturating_mul(1000)
            .saturating_add(u64::from(since.subsec_millis()))
    }
}

/// The level whose slots are as wide as the distance from `elapsed` to `when`: the highest
/// 6-bit digit in which they differ.
fn level_for(elapsed: u64, when: u64) -> usize {
    let masked = (elapsed ^ when) | (SLOTS as u64 - 1);
    let significant = 63 - masked.leading_zeros() as usize;
    (significant / SLOT_BITS as usize).min(LEVELS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn timers_expire_in_order_never_early() {
        let start = Instant::now();
        let mut wheel = TimerWheel::<u16>::new(start);
        wheel.insert(1, start + 5 * MS);
        wheel.insert(2, start + 70 * MS);
        wheel.insert(3, start + Duration::from_secs(10));
        let mut expired = Vec::new();
        wheel.expire(start + 4 * MS, &mut expired);
        assert!(expired.is_empty());
        wheel.expire(start + 5 * MS, &mut expired);
        assert_eq!(expired, [1]);
        assert!(wheel.next_deadline().unwrap() <= start + 70 * MS);
        wheel.expire(start + Duration::from_secs(9), &mut expired);
        assert_eq!(expired, [1, 2]);
        wheel.expire(start + Duration::from_secs(10), &mut expired);
        assert_eq!(expired, [1, 2, 3]);
        assert!(wheel.is_empty());
        assert_eq!(wheel.next_deadline(), None);
    }

    #[test]
    fn moving_and_cancelling_a_timer() {
        let start = Instant::now();
        let mut wheel = TimerWheel::<u16>::new(start);
        wheel.insert(0_u16, start + 10 * MS);
        wheel.insert(1, start + 10 * MS);
        wheel.insert(0, start + 30 * MS); // moved
        assert!(wheel.remove(1));
        assert!(!wheel.remove(1));
        let mut expired = Vec::new();
        wheel.expire(start + 20 * MS, &mut expired);
        assert!(expired.is_empty());
        wheel.expire(start + 30 * MS, &mut expired);
        assert_eq!(expired, [0]);
        assert!(wheel.is_empty());
    }

    #[test]
    fn a_past_deadline_expires_at_once_and_a_far_one_is_held() {
        let start = Instant::now();
        let mut wheel = TimerWheel::<u16>::new(start + Duration::from_secs(1));
        wheel.insert(1, start);
        let mut expired = Vec::new();
        wheel.expire(start + Duration::from_secs(1), &mut expired);
        assert_eq!(expired, [1]);
        wheel.insert(2, start + Duration::from_secs(10 * 365 * 86_400));
        assert!(wheel.next_deadline().is_some());
    }

    /// Review finding F3: a deadline about 795 days or more away, set while the wheel's
    /// clock is not at a multiple of 2³⁰ ms, made `expire` loop forever. Such a deadline is
    /// held, never fired early, and `expire` returns.
    #[test]
    fn a_deadline_years_away_neither_spins_the_wheel_nor_fires_early() {
        let start = Instant::now();
        let mut wheel = TimerWheel::<u16>::new(start);
        let mut expired = Vec::new();
        let now = start + Duration::from_millis(123_456);
        wheel.expire(now, &mut expired);
        let three_years = now + Duration::from_secs(3 * 365 * 86_400);
        wheel.insert(1, three_years);
        wheel.insert(2, now + Duration::from_millis((1 << 36) - 1));
        for days in [1u64, 400, 744, 745, 795] {
            wheel.expire(now + Duration::from_secs(days * 86_400), &mut expired);
            assert!(expired.is_empty(), "nothing is due after {days} days");
        }
        wheel.expire(now + Duration::from_millis((1 << 36) - 1), &mut expired);
        assert_eq!(expired, [2]);
        wheel.expire(three_years, &mut expired);
        assert_eq!(expired, [2, 1]);
        assert!(wheel.is_empty());
    }

    proptest! {
        /// Over the whole range of deadlines (past the wheel's span too) and clocks at any
        /// offset: timers expire exactly when due, and every `expire` returns (a timer put
        /// back where it was taken from trips the wheel's debug assertion instead of
        /// spinning).
        #[test]
        fn deadlines_over_the_full_range_expire_when_due(
            offset in 0u64..(1 << 40),
            deadlines in proptest::collection::vec(0u64..(1 << 40), 1..8),
            steps in proptest::collection::vec(0u64..(1 << 38), 1..40),
        ) {
            let start = Instant::now();
            let mut wheel = TimerWheel::<usize>::new(start);
            let mut expired = Vec::new();
            wheel.expire(start + Duration::from_millis(offset), &mut expired);
            let mut model = BTreeMap::new();
            for (key, distance) in deadlines.iter().enumerate() {
                let when = offset + distance;
                wheel.insert(key, start + Duration::from_millis(when));
                model.insert(key, when);
            }
            let mut now_ms = offset;
            for step in steps {
                now_ms += step;
                let mut expired = Vec::new();
                wheel.expire(start + Duration::from_millis(now_ms), &mut expired);
                expired.sort_unstable();
                let due: Vec<usize> = model.iter().filter(|(_, w)| **w <= now_ms).map(|(k, _)| *k).collect();
                model.retain(|_, w| *w > now_ms);
                prop_assert_eq!(expired, due);
                prop_assert_eq!(wheel.len(), model.len());
            }
        }

        /// Against a sorted map: after any sequence of sets, cancels and clock moves, the
        /// wheel expires exactly the timers due (at millisecond resolution, rounded up), and
        /// its next deadline is never after the earliest timer.
        #[test]
        fn behaves_like_a_sorted_map(ops in proptest::collection::vec((0u8..3, 0u16..64, 0u64..300_000), 1..200)) {
            let start = Instant::now();
            let mut wheel = TimerWheel::<u16>::new(start);
            let mut model: BTreeMap<u16, u64> = BTreeMap::new();
            let mut now_ms = 0u64;
            for (op, key, value) in ops {
                match op {
                    0 => {
                        let when = now_ms + value;
                        wheel.insert(key, start + Duration::from_millis(when));
                        model.insert(key, when);
                    }
                    1 => {
                        prop_assert_eq!(wheel.remove(key), model.remove(&key).is_some());
                    }
                    _ => {
                        now_ms += value % 5_000;
                        let mut expired = Vec::new();
                        wheel.expire(start + Duration::from_millis(now_ms), &mut expired);
                        expired.sort_unstable();
                        let due: Vec<u16> = model.iter().filter(|(_, w)| **w <= now_ms).map(|(k, _)| *k).collect();
                        model.retain(|_, w| *w > now_ms);
                        prop_assert_eq!(expired, due);
                    }
                }
                prop_assert_eq!(wheel.len(), model.len());
                if let Some(earliest) = model.values().min() {
                    let next = wheel.next_deadline().expect("a timer is set");
                    prop_assert!(next <= start + Duration::from_millis(*earliest));
                }
            }
        }
    }
}
