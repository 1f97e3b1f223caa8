//! The transmit buffers an endpoint keeps for reuse, so that a steady send path allocates
//! nothing, bounded so that keeping them cannot grow the process.
//!
//! The list this replaces kept every buffer the driver gave back, up to 4,096 of them, each
//! as large as the largest batch it had ever carried: its size was the all-time peak of
//! batches in one pass times the all-time peak of a batch, and both only ever rose. A
//! 30-minute chat soak showed it as the largest part of a resident size that grew for as
//! long as the relay ran. Three rules hold it now:
//!
//! - a buffer keeps about the room its last batch needed (one datagram at least), so a
//!   buffer that once carried a 64 KB batch does not stay 64 KB while it carries chat;
//! - the buffers kept hold at most [`MAX_SPARE_BYTES`] of capacity in all;
//! - buffers that no take reached for a whole window ([`WINDOW_TAKES`] takes) are released,
//!   so the list follows what recent passes needed, not the busiest pass ever.

use super::MAX_DATAGRAM;

/// The most capacity the kept buffers hold in all: 64 full GSO batches, or about 3,100
/// single datagrams.
pub(crate) const MAX_SPARE_BYTES: usize = 4 << 20;

/// How many takes make one window: the buffers that stayed at the bottom of the list (none
/// of those takes reached them) are released when it ends.
pub(crate) const WINDOW_TAKES: u32 = 8192;

/// Buffers given back by the driver, reused last in, first out: the bottom of the list holds
/// the buffers unused the longest.
#[derive(Debug, Default)]
pub(crate) struct SpareBuffers {
    buffers: Vec<Vec<u8>>,
    /// The capacity of `buffers`, in bytes.
    bytes: usize,
    /// The fewest buffers the list held since the window began: that many at its bottom were
    /// not taken in this window.
    low_water: usize,
    /// Takes in this window.
    takes: u32,
}

impl SpareBuffers {
    /// An empty buffer for the next transmit: a kept one if there is one.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        let buffer = self.buffers.pop().unwrap_or_default();
        self.bytes -= buffer.capacity();
        self.low_water = self.low_water.min(self.buffers.len());
        self.takes += 1;
        if self.takes >= WINDOW_TAKES {
            self.end_window();
        }
        buffer
    }

    /// Keeps a sent transmit's buffer for reuse, cut down to about what it carried, unless the
    /// kept buffers would pass [`MAX_SPARE_BYTES`].
    pub(crate) fn give_back(&mut self, mut buffer: Vec<u8>) {
        // Room for what it carried rounded up to whole datagrams: a batch of the same size
        // next time fits without growing.
        let keep = buffer.len().div_ceil(MAX_DATAGRAM).max(1) * MAX_DATAGRAM;
        buffer.clear();
        if buffer.capacity() > 2 * keep {
            buffer.shrink_to(keep);
        }
        if self.bytes + buffer.capacity() > MAX_SPARE_BYTES {
            return;
        }
        self.bytes += buffer.capacity();
        self.buffers.push(buffer);
    }

    /// Releases the buffers no take reached in this window and starts the next.
    fn end_window(&mut self) {
        let idle = self.low_water.min(self.buffers.len());
        for buffer in self.buffers.drain(..idle) {
            self.bytes -= buffer.capacity();
        }
        self.low_water = self.buffers.len();
        self.takes = 0;
    }

    /// Buffers kept now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.buffers.len()
    }

    /// Their capacity in bytes.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        debug_assert_eq!(
            self.bytes,
            self.buffers.iter().map(Vec::capacity).sum::<usize>()
        );
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::MAX_GSO_BYTES;

    /// One pass: `batches` buffers taken, filled with `size` bytes each, and given back.
    fn pass(spare: &mut SpareBuffers, batches: usize, size: usize) {
        static PACKETS: [u8; MAX_GSO_BYTES] = [1; MAX_GSO_BYTES];
        let taken: Vec<Vec<u8>> = (0..batches)
            .map(|_| {
                let mut buffer = spare.take();
                buffer.extend_from_slice(&PACKETS[..size]);
                buffer
            })
            .collect();
        for buffer in taken {
            spare.give_back(buffer);
        }
    }

    #[test]
    fn a_steady_pass_reuses_the_same_buffers() {
        let mut spare = SpareBuffers::default();
        pass(&mut spare, 100, 200);
        let first: Vec<*const u8> = spare.buffers.iter().map(|b| b.as_ptr()).collect();
        for _ in 0..1000 {
            pass(&mut spare, 100, 200);
        }
        let later: Vec<*const u8> = spare.buffers.iter().map(|b| b.as_ptr()).collect();
        let mut sorted = (first, later);
        sorted.0.sort();
        sorted.1.sort();
        assert_eq!(sorted.0, sorted.1, "no buffer was allocated again");
    }

    #[test]
    fn a_buffer_that_carried_a_large_batch_keeps_only_what_a_small_one_needs() {
        let mut spare = SpareBuffers::default();
        pass(&mut spare, 1, MAX_GSO_BYTES);
        assert!(spare.bytes() >= MAX_GSO_BYTES);
        pass(&mut spare, 1, 100);
        assert_eq!(spare.len(), 1);
        assert!(
            spare.bytes() <= 2 * MAX_DATAGRAM,
            "{} bytes kept",
            spare.bytes()
        );
    }

    #[test]
    fn buffers_left_unused_for_a_window_are_released() {
        let mut spare = SpareBuffers::default();
        pass(&mut spare, 3000, 1000);
        assert_eq!(spare.len(), 3000);
        // Two windows of passes needing 10: the 2,990 below them go.
        for _ in 0..(2 * WINDOW_TAKES as usize / 10 + 1) {
            pass(&mut spare, 10, 1000);
        }
        assert_eq!(spare.len(), 10);
        assert!(spare.bytes() <= 10 * 2 * MAX_DATAGRAM);
    }

    /// The soak's shape in miniature: passes of varying size, a rare one far busier than the
    /// rest. The list keeps no more than the busiest pass of the last two windows needs, and
    /// never more than its byte bound, however long it runs.
    #[test]
    fn the_kept_bytes_follow_recent_passes_and_stay_bounded() {
        let mut spare = SpareBuffers::default();
        let mut seed = 7u64;
        let mut random = move |below: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % below
        };
        for round in 0..20_000 {
            let (batches, size) = if round % 5000 == 0 {
                (200, MAX_GSO_BYTES) // a burst: more than the bound holds
            } else {
                (1 + random(200), 1 + random(3 * MAX_DATAGRAM))
            };
            pass(&mut spare, batches, size);
            assert!(spare.bytes() <= MAX_SPARE_BYTES);
        }
        // The last burst was 5,000 rounds (about 500,000 takes) ago.
        assert!(spare.len() <= 200, "{} buffers kept", spare.len());
        assert!(spare.bytes() <= 200 * 6 * MAX_DATAGRAM);
    }
}
