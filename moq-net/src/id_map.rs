//! A hash map keyed by protocol ids (stream ids, subscribe ids).
//!
//! These keys are small integers the local side or a peer chose, looked up on every stream
//! event, so std's SipHash (built to resist collision attacks on attacker-chosen strings)
//! was a tenth of a session's instructions. A multiplicative (Fibonacci) hash spreads
//! sequential ids across the table at a fraction of the cost. A peer choosing ids to
//! collide can only slow its own session's table, which its stream limits bound.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` from `u64` ids, with a cheap hash.
pub(crate) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// Fibonacci hashing of one `u64`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are used; fold anything else in byte by byte all the same.
        for byte in bytes {
            self.write_u64(self.0 ^ u64::from(*byte));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0 ^ value).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_land_in_distinct_buckets() {
        let mut map = IdMap::default();
        for id in (0..10_000u64).map(|i| i << 2) {
            map.insert(id, id);
        }
        assert_eq!(map.len(), 10_000);
        assert!((0..10_000u64).all(|i| map.get(&(i << 2)) == Some(&(i << 2))));
    }
}
