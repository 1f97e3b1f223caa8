//! The cores a thread-per-core driver runs on, and pinning a worker thread to one.
//!
//! Pinning keeps a worker's connections, timers and caches on one core; it alone cut
//! relay CPU about 19 % in a published fanout test (DESIGN.md, "Thread-per-core").
//! Pinning is Linux's (`sched_setaffinity`); elsewhere [`available`] counts the cores
//! the standard library reports, and nothing is pinned.

/// The CPUs this process may run on (its affinity mask on Linux, which a container or
/// `taskset` may have narrowed; elsewhere `0..available_parallelism`), in order; at least
/// one entry.
pub fn available() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    let cpus: Vec<usize> = linux::affinity();
    #[cfg(not(target_os = "linux"))]
    let cpus: Vec<usize> =
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    if cpus.is_empty() { vec![0] } else { cpus }
}

/// Pins the calling thread to `cpu` (Linux). A failure (a CPU outside the mask) is
/// returned for the caller to log: the worker still runs, unpinned.
#[cfg(target_os = "linux")]
pub fn pin_current_thread(cpu: usize) -> Result<(), nix::Error> {
    linux::pin(cpu)
}

#[cfg(target_os = "linux")]
mod linux {
    use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
    use nix::unistd::Pid;

    /// The calling thread's affinity mask, as CPU numbers.
    pub(super) fn affinity() -> Vec<usize> {
        sched_getaffinity(Pid::from_raw(0))
            .map(|set| {
                (0..CpuSet::count())
                    .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(super) fn pin(cpu: usize) -> Result<(), nix::Error> {
        let mut set = CpuSet::new();
        set.set(cpu)?;
        sched_setaffinity(Pid::from_raw(0), &set)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_runs_only_on_its_cpu() {
        let cpus = available();
        let cpu = *cpus.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            assert_eq!(linux::affinity(), vec![cpu]);
        })
        .join()
        .unwrap();
    }
}
