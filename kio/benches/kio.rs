//! kio micro-benchmarks: the cost of parking and waking, and of one write seen by many readers.
//!
//! ```text
//! cargo bench -p moqx-kio                       # wall-clock: median ns per operation
//! cargo xtask bench --instructions         # instructions per operation, under callgrind
//! ```
//!
//! Every benchmark is single-threaded and deterministic: one "round" is a fixed sequence of
//! calls, so under callgrind the instruction count of `2K` rounds minus that of `K` rounds,
//! divided by `K`, is the exact per-round cost with setup excluded. Wakers are counting
//! wakers, so a wake costs what kio does plus one atomic increment, not an executor's work.
//!
//! The command line is `bench-harness`'s (`--list`, `--only NAME --rounds K`, or a filter).
#![allow(missing_docs)]

use std::hint::black_box;
use std::task::Poll;

use bench_harness::{Bench, counting_waker};

use moqx_kio::log::{LogWriter, Next, Start};
use moqx_kio::{Producer, Queue, Waiter, WaiterList};

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
    Bench::new(name, ops_per_round, unit, setup)
}

fn main() {
    bench_harness::main(benches());
}
