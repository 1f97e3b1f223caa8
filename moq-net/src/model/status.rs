//! The terminal status of a group or a chunked frame, published with one atomic.
//!
//! Readers check it once, after the data log reports closed, so it must be lock-free: a chat
//! subscriber reads one status per message.

use moqx_kio::sync::{AtomicU64, Ordering};

use crate::Error;

const OPEN: u64 = 0;
const FINISHED: u64 = 1;
/// Aborted with wire code `c` is stored as `ABORTED + c` (codes are at most 2^62 − 1).
const ABORTED: u64 = 2;

/// Open, finished, or aborted with an [`Error`].
#[derive(Debug, Default)]
pub(crate) struct Status(AtomicU64);

impl Status {
    /// Records the outcome. The first call wins; later calls are ignored.
    pub(crate) fn set(&self, outcome: Result<(), Error>) {
        let value = match outcome {
            Ok(()) => FINISHED,
            Err(error) => ABORTED + error.to_code(),
        };
        let _ = self
            .0
            .compare_exchange(OPEN, value, Ordering::Release, Ordering::Relaxed);
    }

    /// `None` while open; the outcome once set.
    pub(crate) fn get(&self) -> Option<Result<(), Error>> {
        match self.0.load(Ordering::Acquire) {
            OPEN => None,
            FINISHED => Some(Ok(())),
            aborted => Some(Err(Error::from_code(aborted - ABORTED))),
        }
    }
}
