//! kio micro-benchmarks: the cost of parking and waking, and of one write seen by many readers.
//!
//! ```text
//! cargo bench -p kio                       # wall-clock: median ns per operation
//! cargo xtask bench --instructions         # instructions per operation, under callgrind
//! ```
//!
//! Every benchmark is single-threaded and deterministic: one "round" is a fixed sequence of
//! calls, so under callgrind the instruction count of `2K` rounds minus that of `K` rounds,
//! divided by `K`, is the exact per-round cost with setup excluded. Wakers are counting
//! wakers, so a wake costs what kio does plus one atomic increment, not an executor's work.
//!
//! Arguments: `--list` prints the benchmark names; `--only NAME --rounds K` runs exactly `K`
//! rounds of one benchmark and prints nothing (the mode `cargo xtask bench --instructions`
//! uses); no arguments runs everything with wall-clock timing.
#![allow(missing_docs, clippy::print_stdout, clippy::print_stderr)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Poll, Wake, Waker};

use kio::log::{LogWriter, Next, Start};
use kio::{Producer, Queue, Waiter, WaiterList};

/// A benchmark: a name, how many deliveries one round makes, and a factory for its state.
struct Bench {
    name: String,
    /// Operations one round performs, to report per-operation figures.
    ops_per_round: u64,
    /// What an operation is, for the table.
    unit: &'static str,
    setup: Box<dyn Fn() -> Box<dyn FnMut()>>,
}

fn benches() -> Vec<Bench> {
    let mut all = vec![
        bench("waiter/register+wake", 1, "wake", || {
            let list = WaiterList::new();
            let waiter = Waiter::new(&counting_waker());
            move || {
                list.register(&waiter);
                list.wake_all();
            }
        }),
        bench("waiter/register-again (idempotent)", 1, "register", || {
            let list = WaiterList::new();
            let waiter = Waiter::new(&counting_waker());
            list.register(&waiter);
            move || list.register(black_box(&waiter))
        }),
        bench("waiter/wake-empty-list", 1, "wake", || {
            let list = WaiterList::new();
            move || list.wake_all()
        }),
        bench("queue/push+pop", 1, "item", || {
            let queue = Queue::unbounded();
            let waiter = Waiter::new(&counting_waker());
            move || {
                queue.try_push(black_box(1u64)).ok();
                let _ = black_box(queue.poll_pop(&waiter));
            }
        }),
    ];
    for consumers in [1, 64, 1000] {
        all.push(bench(
            &format!("watch/write seen by {consumers}"),
            consumers,
            "delivery",
            move || watch_fanout(consumers as usize),
        ));
    }
    for readers in [1, 64, 1000] {
        all.push(bench(
            &format!("log/append seen by {readers}"),
            readers,
            "delivery",
            move || log_fanout(readers as usize),
        ));
    }
    all
}

/// One round: the producer writes, every consumer is woken, observes the new value, and parks
/// again (re-registering).
fn watch_fanout(consumers: usize) -> impl FnMut() {
    let producer = Producer::new(0u64);
    let waker = counting_waker();
    let parked: Vec<_> = (0..consumers)
        .map(|_| (producer.consume(), Waiter::new(&waker), 0u64))
        .collect();
    let mut parked = parked;
    for (consumer, waiter, seen) in &mut parked {
        let _ = consumer.poll_until(waiter, |v| (*v > *seen).then_some(*v));
    }
    move || {
        producer.update(|v| *v += 1);
        for (consumer, waiter, seen) in &mut parked {
            let Poll::Ready(Ok(value)) =
                consumer.poll_until(waiter, |v| (*v > *seen).then_some(*v))
            else {
                panic!("a woken consumer sees the write");
            };
            *seen = value;
            assert!(
                consumer
                    .poll_until(waiter, |v| (*v > *seen).then_some(*v))
                    .is_pending()
            );
        }
    }
}

/// One round: the writer appends, every reader is woken, reads the entry, and parks again.
fn log_fanout(readers: usize) -> impl FnMut() {
    let mut writer = LogWriter::new();
    let waker = counting_waker();
    let mut parked: Vec<_> = (0..readers)
        .map(|_| (writer.reader(Start::Next), Waiter::new(&waker)))
        .collect();
    for (reader, waiter) in &mut parked {
        assert!(reader.poll_next(waiter).is_pending());
    }
    let mut next = 0u64;
    move || {
        writer.append(next);
        for (reader, waiter) in &mut parked {
            let Poll::Ready(Next::Item(value)) = reader.poll_next(waiter) else {
                panic!("a woken reader sees the entry");
            };
            black_box(value);
            assert!(reader.poll_next(waiter).is_pending());
        }
        next += 1;
    }
}

fn bench<F, S>(name: &str, ops_per_round: u64, unit: &'static str, setup: S) -> Bench
where
    S: Fn() -> F + 'static,
    F: FnMut() + 'static,
{
    Bench {
        name: name.to_string(),
        ops_per_round,
        unit,
        setup: Box::new(move || Box::new(setup())),
    }
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

fn counting_waker() -> Waker {
    Waker::from(Arc::new(CountingWaker(AtomicUsize::new(0))))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value_of = |flag: &str| {
        args.iter()
            .position(|arg| arg == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let benches = benches();

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
        "{:<40} {:>12} {:>14} {:>16}",
        "benchmark", "ns/round", "ns/op", "op"
    );
    for bench in benches
        .iter()
        .filter(|b| filter.is_none_or(|f| b.name.contains(f.as_str())))
    {
        let ns_per_round = time_rounds(bench);
        println!(
            "{:<40} {:>12.1} {:>14.2} {:>16}",
            bench.name,
            ns_per_round,
            ns_per_round / bench.ops_per_round as f64,
            bench.unit
        );
    }
}

/// Median of 7 samples of about 30 ms each, in nanoseconds per round.
#[allow(clippy::disallowed_methods)] // a benchmark measures wall-clock time by definition
fn time_rounds(bench: &Bench) -> f64 {
    use std::time::{Duration, Instant};
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
