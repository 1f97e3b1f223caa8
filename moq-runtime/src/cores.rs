//! The cores a thread-per-core driver runs on, and pinning a worker thread to one.
//!
//! Pinning keeps a worker's connections, timers and caches on one core; it alone cut
//! relay CPU about 19 % in a published fanout test (DESIGN.md, "Thread-per-core").

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// The CPUs this process may run on (its affinity mask, which a container or `taskset`
/// may have narrowed), in order; at least one entry.
pub fn available() -> Vec<usize> {
    let cpus: Vec<usize> = sched_getaffinity(Pid::from_raw(0))
        .map(|set| {
            (0..CpuSet::count())
                .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
                .collect()
        })
        .unwrap_or_default();
    if cpus.is_empty() { vec![0] } else { cpus }
}

/// Pins the calling thread to `cpu`. A failure (a CPU outside the mask) is returned for
/// the caller to log: the worker still runs, unpinned.
pub fn pin_current_thread(cpu: usize) -> Result<(), nix::Error> {
    let mut set = CpuSet::new();
    set.set(cpu)?;
    sched_setaffinity(Pid::from_raw(0), &set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_runs_only_on_its_cpu() {
        let cpus = available();
        let cpu = *cpus.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            let set = sched_getaffinity(Pid::from_raw(0)).unwrap();
            let allowed: Vec<usize> = (0..CpuSet::count())
                .filter(|&c| set.is_set(c).unwrap_or(false))
                .collect();
            assert_eq!(allowed, vec![cpu]);
        })
        .join()
        .unwrap();
    }
}
