//! moq-lite's stream order, expressed in quiche's urgency levels.
//!
//! quiche sends the stream with the lowest urgency (a `u8`) first, and among streams of one
//! urgency that are not incremental, the lowest stream ID first: the oldest group first,
//! the opposite of moq-lite's "newer group first". So each prioritized stream of a
//! connection gets an urgency of its own, ranked by its [`StreamPriority`] among the
//! connection's other prioritized streams.
//!
//! Group streams use urgencies [`FIRST`]`..=`[`LAST`]; a stream nobody prioritized (a
//! control stream: SETUP, an announce or subscribe stream) keeps quiche's default, 127,
//! ahead of every group.
//!
//! **Cheap in the common case.** A new stream usually goes first (a newer group of the
//! same track) or last: it takes the level next to its neighbour and nothing else moves.
//! Only when no level is free between its neighbours are the live streams spread evenly
//! over the range again, each that moved reported once. Past 128 live streams the least
//! urgent share [`LAST`], in stream ID order.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use foldhash::HashMap;
use moqx_net::transport::StreamPriority;

/// The most urgent level a group stream gets: behind quiche's default (127), which the
/// control streams keep.
pub(crate) const FIRST: u8 = 128;
/// The least urgent level.
pub(crate) const LAST: u8 = 255;

/// Where a stream sits in the order: the most urgent first, then by stream ID.
type Place = (Reverse<StreamPriority>, u64);

/// The urgency of each prioritized stream of one connection.
#[derive(Debug, Default)]
pub(crate) struct Urgencies {
    /// Every prioritized live stream, most urgent first, with its urgency.
    order: BTreeMap<Place, u8>,
    /// Each stream's priority, to find its place.
    priorities: HashMap<u64, StreamPriority>,
}

impl Urgencies {
    /// Gives stream `id` the place of `priority`; pushes every `(stream, urgency)` quiche
    /// must be told of onto `changes` (the stream itself, and any that had to move).
    pub(crate) fn set(&mut self, id: u64, priority: StreamPriority, changes: &mut Vec<(u64, u8)>) {
        if let Some(old) = self.priorities.insert(id, priority) {
            if old == priority {
                return;
            }
            self.order.remove(&(Reverse(old), id));
        }
        let place = (Reverse(priority), id);
        // The levels of the neighbours: `above` more urgent (lower), `below` less urgent.
        let above = self.order.range(..place).next_back().map(|(_, &u)| u);
        let below = self.order.range(place..).next().map(|(_, &u)| u);
        let low = above.map_or(i32::from(FIRST) - 1, i32::from);
        let high = below.map_or(i32::from(LAST) + 1, i32::from);
        let level = if high - low < 2 {
            None
        } else {
            Some(match (above, below) {
                // Next to the neighbour: room stays on the open side for more of the same.
                (None, Some(_)) => high - 1,
                (Some(_), None) => low + 1,
                // Alone in the range: in its upper part, since newer groups come first
                // more often than older ones.
                (None, None) => i32::from(FIRST) + i32::from(LAST - FIRST) * 3 / 4,
                (Some(_), Some(_)) => low + (high - low) / 2,
            })
        };
        match level {
            Some(level) => {
                let level = level as u8; // within FIRST..=LAST by construction
                self.order.insert(place, level);
                changes.push((id, level));
            }
            None => {
                self.order.insert(place, LAST);
                self.spread(id, changes);
            }
        }
    }

    /// The urgency stream `id` has, if it was prioritized.
    pub(crate) fn level(&self, id: u64) -> Option<u8> {
        let priority = *self.priorities.get(&id)?;
        self.order.get(&(Reverse(priority), id)).copied()
    }

    /// Forgets stream `id` (it ended). Nothing else moves.
    pub(crate) fn remove(&mut self, id: u64) {
        if let Some(priority) = self.priorities.remove(&id) {
            self.order.remove(&(Reverse(priority), id));
        }
    }

    /// Spreads every live stream evenly over the range, in order; reports each that moved,
    /// and `new` (just inserted, never told to quiche) whether it moved or not.
    fn spread(&mut self, new: u64, changes: &mut Vec<(u64, u8)>) {
        let count = self.order.len();
        let levels = usize::from(LAST - FIRST) + 1;
        for (rank, ((_, id), level)) in self.order.iter_mut().enumerate() {
            // Evenly spaced while there are levels for all; past that the tail shares LAST.
            let spaced = if count < levels {
                (rank + 1) * levels / (count + 1)
            } else {
                rank
            };
            let level_now = FIRST.saturating_add(u8::try_from(spaced).unwrap_or(u8::MAX));
            if level_now != *level || *id == new {
                *level = level_now;
                changes.push((*id, level_now));
            }
        }
    }

    /// How many streams are ranked.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn priority(subscriber: u8, group: u64) -> StreamPriority {
        StreamPriority { subscriber, group }
    }

    /// Applies `changes` to `levels` as quiche would hold them.
    fn apply(levels: &mut HashMap<u64, u8>, changes: &mut Vec<(u64, u8)>) {
        for (id, level) in changes.drain(..) {
            levels.insert(id, level);
        }
    }

    /// Every pair of live streams is in moq-lite's order at quiche: the more urgent
    /// priority has the lower level, or (sharing LAST) the lower stream ID.
    fn assert_ordered(urgencies: &Urgencies, levels: &HashMap<u64, u8>) {
        let ranked: Vec<(u64, StreamPriority)> = urgencies
            .order
            .keys()
            .map(|(Reverse(priority), id)| (*id, *priority))
            .collect();
        for pair in ranked.windows(2) {
            let (first, second) = (pair[0], pair[1]);
            let (a, b) = (levels[&first.0], levels[&second.0]);
            assert!(
                a < b || (a == b && a == LAST && first.0 < second.0),
                "{first:?} at {a} must go before {second:?} at {b}"
            );
            assert!((FIRST..=LAST).contains(&a));
        }
    }

    #[test]
    fn newer_groups_go_first_without_moving_the_others() {
        let mut urgencies = Urgencies::default();
        let mut levels = HashMap::default();
        let mut changes = Vec::new();
        for group in 0..20u64 {
            urgencies.set(group * 4 + 3, priority(0, group), &mut changes);
            // Only the new stream is reported until the room above runs out.
            assert_eq!(changes.len(), 1, "group {group}");
            apply(&mut levels, &mut changes);
        }
        assert_ordered(&urgencies, &levels);
    }

    #[test]
    fn a_higher_subscriber_priority_beats_a_newer_group() {
        let mut urgencies = Urgencies::default();
        let mut levels = HashMap::default();
        let mut changes = Vec::new();
        urgencies.set(3, priority(1, 9), &mut changes);
        urgencies.set(7, priority(2, 0), &mut changes);
        urgencies.set(11, priority(0, 100), &mut changes);
        apply(&mut levels, &mut changes);
        assert!(levels[&7] < levels[&3] && levels[&3] < levels[&11]);
        assert_ordered(&urgencies, &levels);
    }

    #[test]
    fn the_order_holds_through_any_sequence_of_changes() {
        // A long mixed run: new groups, re-prioritized streams (SUBSCRIBE_UPDATE), ends.
        let mut rng = fastrand::Rng::with_seed(7);
        let mut urgencies = Urgencies::default();
        let mut levels = HashMap::default();
        let mut changes = Vec::new();
        let mut live: Vec<u64> = Vec::new();
        for step in 0..20_000u64 {
            match rng.u8(..10) {
                // Below 128 live streams: each has a level of its own.
                0..=3 if live.len() < 100 => {
                    let id = step * 4 + 3;
                    urgencies.set(id, priority(rng.u8(..4), rng.u64(..50)), &mut changes);
                    live.push(id);
                }
                4 | 5 if !live.is_empty() => {
                    let id = live[rng.usize(..live.len())];
                    urgencies.set(id, priority(rng.u8(..4), rng.u64(..50)), &mut changes);
                }
                _ if !live.is_empty() => {
                    let id = live.swap_remove(rng.usize(..live.len()));
                    urgencies.remove(id);
                    levels.remove(&id);
                }
                _ => {}
            }
            apply(&mut levels, &mut changes);
            assert_ordered(&urgencies, &levels);
            assert_eq!(urgencies.len(), live.len());
        }
    }

    #[test]
    fn past_the_range_the_least_urgent_share_the_last_level() {
        let mut urgencies = Urgencies::default();
        let mut levels = HashMap::default();
        let mut changes = Vec::new();
        // Oldest first: each new one goes last, so the room below runs out.
        for group in 0..300u64 {
            urgencies.set(group * 4 + 3, priority(0, 1_000 - group), &mut changes);
            apply(&mut levels, &mut changes);
        }
        assert_ordered(&urgencies, &levels);
        assert_eq!(
            levels.values().filter(|&&level| level == LAST).count(),
            300 - 127
        );
    }
}
