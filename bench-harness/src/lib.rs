//! # bench-harness: the workspace's micro-benchmark runner
//!
//! This crate **is** the few dozen lines every `benches/*.rs` binary in the workspace shares:
//! a [`Bench`] is a name, the number of operations one *round* performs, and a factory for a
//! closure that runs one round. [`main`] turns a list of them into a benchmark binary that
//!
//! - prints the median wall-clock nanoseconds per round and per operation (no arguments, or a
//!   substring filter: what `cargo bench` runs);
//! - prints `name<TAB>ops<TAB>unit` per benchmark with `--list`;
//! - runs exactly `K` rounds of one benchmark and prints nothing with `--only NAME --rounds K`:
//!   the protocol `cargo xtask bench --instructions` uses to count instructions under
//!   callgrind, as the difference between `2K` and `K` rounds divided by `K`, so process
//!   start-up and setup cancel out.
//!
//! It **is not** a statistics package (criterion is, and is too slow to run under callgrind):
//! rounds are deterministic, so instruction counts are the repeatable figure and wall-clock
//! medians are the indicative one.
#![allow(clippy::print_stdout, clippy::print_stderr)] // a benchmark's output is its product

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

/// A benchmark: a name, how many operations one round performs, and a factory for its state.
pub struct Bench {
    name: String,
    ops_per_round: u64,
    unit: &'static str,
    setup: Box<dyn Fn() -> Box<dyn FnMut()>>,
}

impl Bench {
    /// A benchmark named `name` whose rounds each perform `ops_per_round` operations of kind
    /// `unit` ("delivery", "wake"). `setup` builds the state and returns the round closure;
    /// it runs once per measurement, outside the measured region.
    pub fn new<F, S>(
        name: impl Into<String>,
        ops_per_round: u64,
        unit: &'static str,
        setup: S,
    ) -> Self
    where
        S: Fn() -> F + 'static,
        F: FnMut() + 'static,
    {
        Self {
            name: name.into(),
            ops_per_round,
            unit,
            setup: Box::new(move || Box::new(setup())),
        }
    }
}

impl std::fmt::Debug for Bench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bench")
            .field("name", &self.name)
            .field("ops_per_round", &self.ops_per_round)
            .field("unit", &self.unit)
            .finish_non_exhaustive()
    }
}

/// A waker that only counts its wakes: a wake then costs what the code under test does plus
/// one atomic increment, not an executor's work.
pub fn counting_waker() -> Waker {
    Waker::from(Arc::new(CountingWaker(AtomicUsize::new(0))))
}

/// Runs a benchmark binary over `benches`, following the command line described in the
/// [crate documentation](crate).
pub fn main(benches: Vec<Bench>) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value_of = |flag: &str| {
        args.iter()
            .position(|arg| arg == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };

    if args.iter().any(|arg| arg == "--list") {
        for bench in &benches {
            println!("{}\t{}\t{}", bench.name, bench.ops_per_round, bench.unit);
        }
        return;
    }

    if let Some(only) = value_of("--only") {
        let rounds: u64 = value_of("--rounds")
            .and_then(|r| r.parse().ok())
            .unwrap_or(1000);
        let Some(bench) = benches.iter().find(|b| b.name == only) else {
            eprintln!("no benchmark named {only:?}; see --list");
            std::process::exit(2);
        };
        let mut round = (bench.setup)();
        for _ in 0..rounds {
            round();
        }
        return;
    }

    // `cargo bench` passes `--bench`; any other argument filters by substring.
    let filter = args.iter().find(|arg| !arg.starts_with("--"));
    println!(
        "{:<44} {:>12} {:>14} {:>12}",
        "benchmark", "ns/round", "ns/op", "op"
    );
    for bench in benches
        .iter()
        .filter(|b| filter.is_none_or(|f| b.name.contains(f.as_str())))
    {
        let ns_per_round = time_rounds(bench);
        println!(
            "{:<44} {:>12.1} {:>14.2} {:>12}",
            bench.name,
            ns_per_round,
            ns_per_round / bench.ops_per_round as f64,
            bench.unit
        );
    }
}

/// Median of 7 samples of about 30 ms each, in nanoseconds per round.
fn time_rounds(bench: &Bench) -> f64 {
    let mut round = (bench.setup)();
    // Calibrate: double the rounds until one sample takes long enough to time reliably.
    let mut rounds = 1u64;
    loop {
        let start = Instant::now();
        for _ in 0..rounds {
            round();
        }
        if start.elapsed() > Duration::from_millis(30) {
            break;
        }
        rounds *= 2;
    }
    let mut samples: Vec<f64> = (0..7)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..rounds {
                round();
            }
            start.elapsed().as_nanos() as f64 / rounds as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}
