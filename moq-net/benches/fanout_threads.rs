//! The multi-threaded fanout reproducer (DESIGN.md, "Fanout lock contention").
//!
//! 64 subscriber tasks read one chat-shaped track (100-byte frames, one per group) on tokio's
//! work-stealing pool with a worker per core, while a publisher task writes it. A relay whose
//! subscribers share a lock on every read shows *bimodal* CPU here: rounds where the tasks
//! spread over the workers cost 2–3× the rounds where they happen to bunch up. The model's
//! reads take no shared lock, so the CPU time per delivered frame should be the same every
//! round.
//!
//! Each round builds a fresh runtime (so task placement is redrawn), publishes `--groups`
//! groups, and reads the process's CPU time (user + system, `getrusage`) around the run.
//! Four configurations alternate in every round, so that they share the machine's noise:
//!
//! - the model on every core (the figure the issue asks for), and on one worker: the
//!   single-worker rounds cannot contend, so their spread is the machine's own noise floor,
//!   and the ratio between the two is the cost of moving tasks and cache lines between cores;
//! - a **locked track**, the design the lesson warns about (a `Mutex` around the track's
//!   groups, taken by every subscriber on every read, wakers called after the unlock), on
//!   every core and on one worker: what the same workload costs when reads share a lock;
//! - **private queues**, one per subscriber, sharing nothing: the floor set by tokio's task
//!   migrations and by the machine, against which the other two are judged.
//!
//! The per-round *paired ratio* (every core over one worker, measured back to back) cancels
//! drift of the whole machine; its spread is the bimodality figure to read on a shared VM.
//!
//! A fifth configuration runs the model **thread per core**, as a thread-per-core relay
//! does: one pinned thread per core, each a current-thread runtime holding its share of the
//! subscribers (dealt round robin, as connections land on workers), the publisher on the
//! first. No task ever moves between cores; only the model's cache lines cross them.
//!
//! ```text
//! cargo bench -p moqx-net --bench fanout_threads [-- --rounds 7 --groups 20000 --subscribers 64]
//! ```
#![allow(missing_docs, clippy::print_stdout, clippy::print_stderr)]

use std::hint::black_box;
use std::time::Duration;

use std::future::poll_fn;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

use bytes::Bytes;
use moqx_kio::Waiter;
use moqx_net::model::{Track, TrackProducer};
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeValLike;
use nix::unistd::Pid;

/// What one round measured.
#[derive(Debug, Clone, Copy)]
struct Sample {
    cpu: Duration,
    delivered: u64,
    lagged: u64,
    voluntary_switches: i64,
    involuntary_switches: i64,
}

impl Sample {
    fn cpu_ns_per_frame(&self) -> f64 {
        self.cpu.as_nanos() as f64 / self.delivered.max(1) as f64
    }
}

struct Options {
    rounds: usize,
    groups: u64,
    subscribers: usize,
    workers: usize,
}

/// Which track design a round runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Design {
    /// `moqx_net::model`: lock-free reads over `moqx_kio::log`.
    Model,
    /// A track-wide `Mutex` taken on every read.
    Locked,
    /// No shared track at all: the publisher pushes each frame into one private queue per
    /// subscriber. The same wakeups and task migrations with no cache line shared between
    /// subscribers: the scheduler's and the machine's own variation.
    Queues,
    /// The model, thread per core: pinned current-thread runtimes, subscribers dealt
    /// round robin.
    ModelPerCore,
}

fn main() {
    let options = Options::parse();
    println!(
        "{} subscribers, {} groups of one 100-byte frame per round, {} workers vs 1",
        options.subscribers, options.groups, options.workers
    );
    println!(
        "{:>5} {:>7} {:>8} {:>14} {:>12} {:>10} {:>10} {:>10}",
        "round", "track", "workers", "cpu ns/frame", "delivered", "lagged", "vol cs", "invol cs"
    );
    let configurations = [
        (Design::Model, options.workers),
        (Design::Model, 1),
        (Design::Locked, options.workers),
        (Design::Locked, 1),
        (Design::Queues, options.workers),
        (Design::Queues, 1),
        (Design::ModelPerCore, options.workers),
    ];
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); configurations.len()];
    for round_number in 1..=options.rounds {
        for (&(design, workers), results) in configurations.iter().zip(&mut results) {
            let sample = round(design, workers, options.subscribers, options.groups);
            println!(
                "{:>5} {:>7} {:>8} {:>14.1} {:>12} {:>10} {:>10} {:>10}",
                round_number,
                design.name(),
                workers,
                sample.cpu_ns_per_frame(),
                sample.delivered,
                sample.lagged,
                sample.voluntary_switches,
                sample.involuntary_switches
            );
            results.push(sample.cpu_ns_per_frame());
        }
    }
    println!();
    let mut medians = Vec::new();
    for (&(design, workers), results) in configurations.iter().zip(&results) {
        let (median, spread) = summary(results);
        medians.push(median);
        println!(
            "{:>7} on {workers} worker(s): median {median:>7.1} ns/frame, max/min spread {spread:.3}x",
            design.name()
        );
    }
    // Paired ratios: each round's every-core figure over the single-worker figure measured
    // right after it. Drift of the whole machine (a noisy neighbour, vCPU placement) moves
    // both and cancels; what remains is the cost of spreading over cores, round by round.
    for (name, spread_index) in [("model", 0), ("locked", 2), ("queues", 4)] {
        let ratios: Vec<f64> = results[spread_index]
            .iter()
            .zip(&results[spread_index + 1])
            .map(|(every_core, one_worker)| every_core / one_worker)
            .collect();
        let (median, spread) = summary(&ratios);
        let listed: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "{name:>7} every core / one worker, per round: [{}], median {median:.2}x, spread {spread:.3}x",
            listed.join(", ")
        );
    }
    println!(
        "locked vs model on every core (medians): {:.2}x",
        medians[2] / medians[0]
    );
    println!(
        "model thread per core vs work-stealing on every core (medians): {:.2}x",
        medians[6] / medians[0]
    );
}

impl Design {
    fn name(self) -> &'static str {
        match self {
            Design::Model => "model",
            Design::Locked => "locked",
            Design::Queues => "queues",
            Design::ModelPerCore => "model-pc",
        }
    }
}

/// One round on a fresh runtime with `workers` threads.
fn round(design: Design, workers: usize, subscribers: usize, groups: u64) -> Sample {
    let work_stealing = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .build()
            .expect("a tokio runtime")
    };
    match design {
        Design::Model => model_round(&work_stealing(), subscribers, groups),
        Design::Locked => locked_round(&work_stealing(), subscribers, groups),
        Design::Queues => queues_round(&work_stealing(), subscribers, groups),
        Design::ModelPerCore => per_core_round(workers, subscribers, groups),
    }
}

fn model_round(runtime: &tokio::runtime::Runtime, subscribers: usize, groups: u64) -> Sample {
    let track = TrackProducer::new(Track::new("chat"));
    let readers: Vec<_> = (0..subscribers)
        .map(|_| runtime.spawn(read_all(track.consume())))
        .collect();
    let before = resource_usage();
    let publisher = runtime.spawn(publish(track, groups));
    finish(runtime, before, publisher, readers)
}

/// The model thread per core: `workers` pinned threads, each a current-thread runtime
/// with every `workers`-th subscriber; the publisher on the first.
fn per_core_round(workers: usize, subscribers: usize, groups: u64) -> Sample {
    let track = TrackProducer::new(Track::new("chat"));
    let mut shares: Vec<Vec<_>> = (0..workers).map(|_| Vec::new()).collect();
    for index in 0..subscribers {
        shares[index % workers].push(track.consume());
    }
    let cpus = allowed_cpus();
    let start = Arc::new(std::sync::Barrier::new(workers + 1));
    let mut publisher = Some(track);
    let threads: Vec<_> = shares
        .into_iter()
        .enumerate()
        .map(|(index, consumers)| {
            let cpu = cpus[index % cpus.len()];
            let start = start.clone();
            let publisher = if index == 0 { publisher.take() } else { None };
            std::thread::spawn(move || {
                let mut set = CpuSet::new();
                let _ = set.set(cpu);
                let _ = sched_setaffinity(Pid::from_raw(0), &set);
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .expect("a tokio runtime");
                start.wait();
                runtime.block_on(async move {
                    let readers: Vec<_> = consumers
                        .into_iter()
                        .map(|consumer| tokio::spawn(read_all(consumer)))
                        .collect();
                    if let Some(track) = publisher {
                        publish(track, groups).await;
                    }
                    join_readers(readers).await
                })
            })
        })
        .collect();
    let before = resource_usage();
    start.wait();
    let (mut delivered, mut lagged) = (0, 0);
    for thread in threads {
        let (d, l) = thread.join().expect("a worker");
        delivered += d;
        lagged += l;
    }
    since(before, delivered, lagged)
}

/// The CPUs this process may run on (moqx-runtime's `cores::available`, which this crate
/// cannot depend on).
fn allowed_cpus() -> Vec<usize> {
    let cpus: Vec<usize> = sched_getaffinity(Pid::from_raw(0))
        .map(|set| {
            (0..CpuSet::count())
                .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
                .collect()
        })
        .unwrap_or_default();
    if cpus.is_empty() { vec![0] } else { cpus }
}

/// Publishes `groups` groups of one 100-byte frame, yielding between them.
async fn publish(mut track: TrackProducer, groups: u64) {
    let payload = Bytes::from(vec![b'x'; 100]);
    for timestamp in 0..groups {
        let mut group = track.append_group();
        group.write(timestamp, payload.clone());
        group.finish();
        tokio::task::yield_now().await;
    }
    track.finish();
}

/// Reads every frame of `consumer`'s track; returns how many, and how many groups it
/// lagged past.
async fn read_all(mut consumer: moqx_net::model::TrackConsumer) -> (u64, u64) {
    let mut waiter: Option<Waiter> = None;
    let mut delivered = 0u64;
    loop {
        let group =
            poll_fn(|cx| consumer.poll_next_group(task_waiter(&mut waiter, cx.waker()))).await;
        let Some(mut group) = group.expect("a clean track") else {
            break;
        };
        loop {
            let frame =
                poll_fn(|cx| group.poll_read_frame(task_waiter(&mut waiter, cx.waker()))).await;
            match frame.expect("a clean group") {
                Some(frame) => {
                    black_box(frame);
                    delivered += 1;
                }
                None => break,
            }
        }
    }
    (delivered, consumer.lagged())
}

/// The task's waiter, pointed at the current waker.
fn task_waiter<'a>(waiter: &'a mut Option<Waiter>, waker: &Waker) -> &'a Waiter {
    match waiter {
        Some(waiter) => {
            waiter.set_waker(waker);
            waiter
        }
        None => waiter.insert(Waiter::new(waker)),
    }
}

/// Waits for the publisher and the readers and measures the round.
fn finish(
    runtime: &tokio::runtime::Runtime,
    before: Sample,
    publisher: tokio::task::JoinHandle<()>,
    readers: Vec<tokio::task::JoinHandle<(u64, u64)>>,
) -> Sample {
    let (delivered, lagged) = runtime.block_on(async {
        publisher.await.expect("the publisher");
        join_readers(readers).await
    });
    since(before, delivered, lagged)
}

/// What each subscriber task delivered and lagged, summed.
async fn join_readers(readers: Vec<tokio::task::JoinHandle<(u64, u64)>>) -> (u64, u64) {
    let mut totals = (0, 0);
    for reader in readers {
        let (delivered, lagged) = reader.await.expect("a subscriber");
        totals.0 += delivered;
        totals.1 += lagged;
    }
    totals
}

/// The round's sample: the resources used since `before`, for what was delivered.
fn since(before: Sample, delivered: u64, lagged: u64) -> Sample {
    let after = resource_usage();
    Sample {
        cpu: after.cpu.saturating_sub(before.cpu),
        delivered,
        lagged,
        voluntary_switches: after.voluntary_switches - before.voluntary_switches,
        involuntary_switches: after.involuntary_switches - before.involuntary_switches,
    }
}

/// The same workload through a track that every subscriber locks on every read.
fn locked_round(runtime: &tokio::runtime::Runtime, subscribers: usize, groups: u64) -> Sample {
    let track = Arc::new(LockedTrack::default());
    let readers: Vec<_> = (0..subscribers)
        .map(|_| {
            let track = track.clone();
            runtime.spawn(async move {
                let mut next = 0usize;
                let mut delivered = 0u64;
                while let Some(frames) = poll_fn(|cx| track.poll_group(next, cx.waker())).await {
                    for frame in frames.iter() {
                        black_box(frame.clone());
                        delivered += 1;
                    }
                    next += 1;
                }
                (delivered, 0)
            })
        })
        .collect();

    let before = resource_usage();
    let payload = Bytes::from(vec![b'x'; 100]);
    let publisher = {
        let track = track.clone();
        runtime.spawn(async move {
            for _ in 0..groups {
                track.append(Arc::new(vec![payload.clone()]));
                tokio::task::yield_now().await;
            }
            track.finish();
        })
    };
    finish(runtime, before, publisher, readers)
}

/// The same workload with one private queue per subscriber and nothing shared.
fn queues_round(runtime: &tokio::runtime::Runtime, subscribers: usize, groups: u64) -> Sample {
    let queues: Vec<moqx_kio::Queue<Bytes>> = (0..subscribers)
        .map(|_| moqx_kio::Queue::unbounded())
        .collect();
    let readers: Vec<_> = queues
        .iter()
        .map(|queue| {
            let queue = queue.clone();
            runtime.spawn(async move {
                let mut waiter: Option<Waiter> = None;
                let mut delivered = 0u64;
                while let Some(frame) =
                    poll_fn(|cx| queue.poll_pop(task_waiter(&mut waiter, cx.waker()))).await
                {
                    black_box(frame);
                    delivered += 1;
                }
                (delivered, 0)
            })
        })
        .collect();

    let before = resource_usage();
    // One payload per subscriber, so that not even a reference count is shared.
    let payloads: Vec<Bytes> = (0..subscribers)
        .map(|_| Bytes::from(vec![b'x'; 100]))
        .collect();
    let publisher = runtime.spawn(async move {
        for _ in 0..groups {
            for (queue, payload) in queues.iter().zip(&payloads) {
                let _ = queue.try_push(payload.clone());
            }
            tokio::task::yield_now().await;
        }
        queues.iter().for_each(moqx_kio::Queue::close);
    });
    finish(runtime, before, publisher, readers)
}

/// A track behind one lock: the design DESIGN.md's "Fanout lock contention" measured.
#[derive(Default)]
struct LockedTrack {
    state: Mutex<LockedState>,
}

#[derive(Default)]
struct LockedState {
    groups: Vec<Arc<Vec<Bytes>>>,
    finished: bool,
    wakers: Vec<Waker>,
}

impl LockedTrack {
    fn append(&self, group: Arc<Vec<Bytes>>) {
        let mut state = self.state.lock().expect("unpoisoned");
        state.groups.push(group);
        let wakers = std::mem::take(&mut state.wakers);
        drop(state);
        wakers.into_iter().for_each(Waker::wake);
    }

    fn finish(&self) {
        let mut state = self.state.lock().expect("unpoisoned");
        state.finished = true;
        let wakers = std::mem::take(&mut state.wakers);
        drop(state);
        wakers.into_iter().for_each(Waker::wake);
    }

    fn poll_group(&self, index: usize, waker: &Waker) -> Poll<Option<Arc<Vec<Bytes>>>> {
        let mut state = self.state.lock().expect("unpoisoned");
        if let Some(group) = state.groups.get(index) {
            return Poll::Ready(Some(group.clone()));
        }
        if state.finished {
            return Poll::Ready(None);
        }
        state.wakers.push(waker.clone());
        Poll::Pending
    }
}

/// The process's CPU time and context switches so far.
fn resource_usage() -> Sample {
    let usage = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage(RUSAGE_SELF)");
    let micros = usage.user_time().num_microseconds() + usage.system_time().num_microseconds();
    Sample {
        cpu: Duration::from_micros(micros.max(0) as u64),
        delivered: 0,
        lagged: 0,
        voluntary_switches: usage.voluntary_context_switches(),
        involuntary_switches: usage.involuntary_context_switches(),
    }
}

/// The median and the max/min spread of per-round figures.
fn summary(values: &[f64]) -> (f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let spread = sorted[sorted.len() - 1] / sorted[0];
    (median, spread)
}

impl Options {
    fn parse() -> Self {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let value = |flag: &str, default: u64| -> u64 {
            args.iter()
                .position(|arg| arg == flag)
                .and_then(|i| args.get(i + 1))
                .map(|text| {
                    text.parse().unwrap_or_else(|_| {
                        eprintln!("{flag} takes a positive number, not {text:?}");
                        std::process::exit(2);
                    })
                })
                .unwrap_or(default)
                .max(1)
        };
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
        Self {
            rounds: value("--rounds", 7) as usize,
            groups: value("--groups", 20_000),
            subscribers: value("--subscribers", 64) as usize,
            workers: value("--workers", cores) as usize,
        }
    }
}
