//! One worker's ring: built for one thread, submitting in batches, waiting with an absolute
//! deadline.
//!
//! The ring is `SINGLE_ISSUER | DEFER_TASKRUN | COOP_TASKRUN`: only the worker thread
//! submits, and the kernel runs completion work when that thread enters the ring, not by
//! interrupting it. Completions are therefore reaped in one place per turn, and a
//! completion never arrives while the worker is in the middle of its own work.

use std::io;
use std::time::Instant;

use io_uring::types::{SubmitArgs, Timespec};
use io_uring::{IoUring, squeue};

use crate::counters::WorkerCounters;

/// Submission queue entries per ring: one turn's sends fit without an extra submit.
pub(crate) const SUBMISSION_ENTRIES: u32 = 1024;

/// Builds a ring with the worker's flags. Must run on the thread that will use it.
pub(crate) fn build(entries: u32) -> io::Result<IoUring> {
    IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_coop_taskrun()
        // Tells `submit` when completions wait to be run, so that it enters the ring.
        .setup_taskrun_flag()
        // Multishot receives post many completions per submission.
        .setup_cqsize(entries * 8)
        .build(entries)
}

/// Queues `entry`, submitting what is queued first if the queue is full.
pub(crate) fn push(ring: &mut IoUring, entry: &squeue::Entry) -> io::Result<()> {
    Queue {
        ring,
        counters: &WorkerCounters::default(),
    }
    .push(entry)
}

/// A ring to queue submissions on, counting the system calls a full queue costs.
pub(crate) struct Queue<'a> {
    pub(crate) ring: &'a mut IoUring,
    pub(crate) counters: &'a WorkerCounters,
}

impl Queue<'_> {
    /// Queues `entry`, submitting what is queued first if the queue is full.
    pub(crate) fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every entry the worker builds points at memory it keeps alive until
            // the entry's completion (see `send`, `recv`, `buffers`), or at nothing.
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                return Ok(());
            }
            self.counters.add(&self.counters.enters, 1);
            self.ring.submit()?;
        }
    }
}

/// Converts `Instant`s to the ring's clock (`CLOCK_MONOTONIC`, which `Instant` reads too).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    instant: Instant,
    seconds: u64,
    nanos: u32,
}

impl Clock {
    /// Reads both clocks once.
    pub(crate) fn new() -> Self {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        Self {
            instant: Instant::now(),
            seconds: now.tv_sec as u64,
            nanos: now.tv_nsec as u32,
        }
    }

    /// `at` on the ring's clock (the reading itself for an `at` before it).
    pub(crate) fn absolute(&self, at: Instant) -> Timespec {
        let (seconds, nanos) = self.seconds_and_nanos(at);
        Timespec::new().sec(seconds).nsec(nanos)
    }

    fn seconds_and_nanos(&self, at: Instant) -> (u64, u32) {
        let after = at.saturating_duration_since(self.instant);
        let nanos = u64::from(self.nanos) + u64::from(after.subsec_nanos());
        (
            self.seconds + after.as_secs() + nanos / 1_000_000_000,
            (nanos % 1_000_000_000) as u32,
        )
    }
}

/// Submits what is queued and waits for a completion until `deadline` (forever with
/// `None`). A deadline that passes is not an error.
pub(crate) fn submit_and_wait(
    ring: &IoUring,
    deadline: Option<Instant>,
    clock: &Clock,
) -> io::Result<()> {
    let result = match deadline {
        None => ring.submit_and_wait(1).map(drop),
        Some(at) => {
            let at = clock.absolute(at);
            let args = SubmitArgs::new().timespec(&at);
            ring.submitter()
                .submit_with_args_and_flags(1, &args, io_uring::EnterFlags::ABS_TIMER)
                .map(drop)
        }
    };
    match result {
        Err(error) if matches!(error.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => Ok(()),
        // The completion queue is full: the caller reaps it first.
        Err(error) if error.raw_os_error() == Some(libc::EBUSY) => Ok(()),
        other => other,
    }
}

/// Submits what is queued and waits for a completion for at most `timeout`, with a
/// relative timeout: for the probe, which must work on kernels without absolute ones.
pub(crate) fn submit_and_wait_for(ring: &IoUring, timeout: std::time::Duration) -> io::Result<()> {
    let timeout = Timespec::from(timeout);
    let args = SubmitArgs::new().timespec(&timeout);
    match ring.submitter().submit_with_args(1, &args) {
        Err(error) if matches!(error.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => Ok(()),
        other => other.map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_instant_maps_onto_the_monotonic_clock() {
        let clock = Clock::new();
        let nanos =
            |(seconds, nanos): (u64, u32)| u128::from(seconds) * 1_000_000_000 + u128::from(nanos);
        let start = nanos(clock.seconds_and_nanos(clock.instant));
        let later = nanos(clock.seconds_and_nanos(clock.instant + Duration::from_millis(1500)));
        assert_eq!(later - start, 1_500_000_000);
        let earlier = nanos(clock.seconds_and_nanos(clock.instant - Duration::from_secs(1)));
        assert_eq!(earlier, start, "the past is now");
    }
}
