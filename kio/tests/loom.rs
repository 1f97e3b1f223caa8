//! Loom models of kio's concurrency protocols.
//!
//! Run with `cargo xtask loom` (which sets `RUSTFLAGS="--cfg loom"` and a preemption bound).
//! Each model is small on purpose: loom explores every interleaving, so a model's cost grows
//! exponentially with its operations. A lost wakeup shows up as a loom deadlock report,
//! because `loom::future::block_on` parks until woken.
#![cfg(loom)]

use std::sync::Arc as StdArc;
use std::task::{Poll, Wake, Waker};

use loom::future::block_on;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;
use moqx_kio::log::{LogConfig, LogWriter, Next, Start};
use moqx_kio::{Producer, Queue, Waiter, WaiterList, WaiterSlot, wait};

/// A flag guarded by a waiter list: the smallest instance of the protocol every kio primitive
/// follows (check, register, re-check; store, wake).
struct Flag {
    set: AtomicBool,
    waiters: WaiterList,
}

impl Flag {
    fn new() -> Self {
        Self {
            set: AtomicBool::new(false),
            waiters: WaiterList::new(),
        }
    }

    fn set(&self) {
        self.set.store(true, Ordering::Release);
        self.waiters.wake_all();
    }

    fn poll(&self, waiter: &Waiter) -> Poll<()> {
        if self.set.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        self.waiters.register(waiter);
        if self.set.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// Counts wakes with a loom atomic, so loom sees the counter's accesses.
struct WakeCounter(AtomicUsize);

impl Wake for WakeCounter {
    fn wake(self: StdArc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn no_lost_wakeup_between_check_and_register() {
    loom::model(|| {
        let flag = Arc::new(Flag::new());
        let setter = {
            let flag = flag.clone();
            thread::spawn(move || flag.set())
        };
        block_on(wait(|waiter| flag.poll(waiter)));
        setter.join().unwrap();
    });
}

#[test]
fn a_waiter_in_two_lists_woken_by_both_at_once_is_woken_once_and_reusable() {
    loom::model(|| {
        let first = Arc::new(Flag::new());
        let second = Arc::new(Flag::new());
        let counter = StdArc::new(WakeCounter(AtomicUsize::new(0)));
        let waiter = Waiter::new(&Waker::from(counter.clone()));
        assert!(first.poll(&waiter).is_pending());
        assert!(second.poll(&waiter).is_pending());
        let threads: Vec<_> = [first.clone(), second.clone()]
            .into_iter()
            .map(|flag| thread::spawn(move || flag.set()))
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(
            counter.0.load(Ordering::SeqCst),
            1,
            "one wake per generation"
        );

        // Reuse: the same waiter parks again and is woken again.
        let third = Arc::new(Flag::new());
        assert!(third.poll(&waiter).is_pending());
        let setter = {
            let third = third.clone();
            thread::spawn(move || third.set())
        };
        setter.join().unwrap();
        assert_eq!(counter.0.load(Ordering::SeqCst), 2);
    });
}

/// A flag guarded by a [`WaiterSlot`] under the flag's own lock: the shape of a QUIC
/// stream's reader in the connection adapter.
struct SlotFlag {
    state: loom::sync::Mutex<(bool, WaiterSlot)>,
}

impl SlotFlag {
    fn set(&self) {
        let waker = {
            let mut state = self.state.lock().unwrap();
            state.0 = true;
            state.1.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn poll(&self, waiter: &Waiter) -> Poll<()> {
        let mut state = self.state.lock().unwrap();
        if state.0 {
            return Poll::Ready(());
        }
        state.1.register(waiter);
        Poll::Pending
    }
}

#[test]
fn a_slot_under_its_owners_lock_loses_no_wakeup_and_shares_the_waiter_with_a_list() {
    loom::model(|| {
        let slotted = Arc::new(SlotFlag {
            state: loom::sync::Mutex::new((false, WaiterSlot::new())),
        });
        let listed = Arc::new(Flag::new());
        let setters: Vec<_> = [0, 1]
            .into_iter()
            .map(|which| {
                let (slotted, listed) = (slotted.clone(), listed.clone());
                thread::spawn(move || {
                    if which == 0 {
                        slotted.set();
                    } else {
                        listed.set();
                    }
                })
            })
            .collect();
        // One waiter parked on both: whichever fires first wakes it, and the task sees
        // both set in the end without a lost wakeup (loom would report a deadlock).
        block_on(wait(|waiter| {
            let a = slotted.poll(waiter);
            let b = listed.poll(waiter);
            if a.is_ready() && b.is_ready() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }));
        for setter in setters {
            setter.join().unwrap();
        }
    });
}

#[test]
fn reused_waiter_does_not_lose_the_second_wake() {
    loom::model(|| {
        let first = Arc::new(Flag::new());
        let second = Arc::new(Flag::new());
        let setter = {
            let (first, second) = (first.clone(), second.clone());
            thread::spawn(move || {
                first.set();
                second.set();
            })
        };
        // One future, one waiter, two sequential waits on different lists.
        let mut stage = 0;
        block_on(wait(|waiter| {
            loop {
                let flag = if stage == 0 { &first } else { &second };
                match flag.poll(waiter) {
                    Poll::Ready(()) if stage == 0 => stage = 1,
                    Poll::Ready(()) => return Poll::Ready(()),
                    Poll::Pending => return Poll::Pending,
                }
            }
        }));
        setter.join().unwrap();
    });
}

#[test]
fn watch_close_racing_the_last_producer_drop_is_seen() {
    loom::model(|| {
        let producer = Producer::new(0u8);
        let consumer = producer.consume();
        let other = producer.clone();
        let a = thread::spawn(move || {
            producer.update(|v| *v = 1);
            drop(producer);
        });
        let b = thread::spawn(move || drop(other));
        block_on(consumer.closed());
        assert_eq!(*consumer.borrow(), 1);
        a.join().unwrap();
        b.join().unwrap();
    });
}

#[test]
fn producer_sees_the_last_consumer_leave() {
    loom::model(|| {
        let producer = Producer::new(());
        let first = producer.consume();
        let second = first.clone();
        let a = thread::spawn(move || drop(first));
        let b = thread::spawn(move || drop(second));
        block_on(producer.unused());
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(producer.consumer_count(), 0);
    });
}

#[test]
fn queue_push_pop_close_delivers_everything_in_order() {
    loom::model(|| {
        let queue = Queue::bounded(1);
        let pusher = {
            let queue = queue.clone();
            thread::spawn(move || {
                block_on(queue.push(1)).unwrap();
                block_on(queue.push(2)).unwrap();
                queue.close();
            })
        };
        let mut received = Vec::new();
        while let Some(item) = block_on(queue.pop()) {
            received.push(item);
        }
        assert_eq!(received, [1, 2]);
        pusher.join().unwrap();
    });
}

#[test]
fn log_reader_parked_while_an_entry_is_published_across_a_chunk_boundary() {
    loom::model(|| {
        let config = LogConfig {
            first_chunk: 1,
            max_chunk: 1,
            retain: None,
        };
        let mut writer = LogWriter::with_config(config);
        let mut reader = writer.reader(Start::Oldest);
        let publisher = thread::spawn(move || {
            writer.append(10u8);
            writer.append(11u8);
        });
        let mut seen = Vec::new();
        loop {
            match block_on(reader.next()) {
                Next::Item(value) => seen.push(value),
                Next::Closed => break,
                Next::Lagged(_) => panic!("nothing is released without retention"),
            }
        }
        assert_eq!(seen, [10, 11]);
        publisher.join().unwrap();
    });
}

/// `append_before_close`: a reader parked on the log, woken only by the close, sees the
/// entry appended before it, then the end, whatever the interleaving.
#[test]
fn log_entry_appended_before_the_close_is_seen_by_a_parked_reader() {
    loom::model(|| {
        let mut writer = LogWriter::with_config(LogConfig {
            first_chunk: 1,
            max_chunk: 1,
            retain: None,
        });
        let mut reader = writer.reader(Start::Oldest);
        let publisher = thread::spawn(move || {
            writer.append_before_close(7u8);
            writer.close();
        });
        let mut seen = Vec::new();
        loop {
            match block_on(reader.next()) {
                Next::Item(value) => seen.push(value),
                Next::Closed => break,
                Next::Lagged(_) => panic!("nothing is released without retention"),
            }
        }
        assert_eq!(seen, [7]);
        publisher.join().unwrap();
    });
}

#[test]
fn log_readers_joining_while_the_writer_finishes_see_every_entry() {
    loom::model(|| {
        let mut writer = LogWriter::with_config(LogConfig {
            first_chunk: 1,
            max_chunk: 2,
            retain: None,
        });
        let joiner = writer.reader(Start::Next);
        let late = thread::spawn(move || {
            let mut reader = joiner.reader(Start::Oldest);
            let mut seen = Vec::new();
            while let Next::Item(value) = block_on(reader.next()) {
                seen.push(value);
            }
            seen
        });
        writer.append(1u8);
        writer.append(2u8);
        writer.close();
        assert_eq!(late.join().unwrap(), [1, 2]);
    });
}

#[test]
fn log_reader_behind_retention_skips_ahead_and_ends_on_the_last_entry() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(|| {
        let mut writer = LogWriter::with_config(LogConfig {
            first_chunk: 1,
            max_chunk: 1,
            retain: Some(1),
        });
        let mut reader = writer.reader(Start::Oldest);
        let publisher = thread::spawn(move || {
            for value in 0..3u64 {
                writer.append(value);
            }
        });
        let mut last = None;
        let mut position = 0;
        loop {
            match block_on(reader.next()) {
                Next::Item(value) => {
                    assert!(last.is_none_or(|last| value > last), "in order");
                    assert_eq!(value, position, "positions and values agree");
                    position += 1;
                    last = Some(value);
                }
                Next::Lagged(skipped) => position += skipped,
                Next::Closed => break,
            }
        }
        assert_eq!(last, Some(2), "the last entry is always retained");
        publisher.join().unwrap();
    });
}

/// `set_retain` releasing chunks while a reader joins from a handle and reads: the reader
/// starts inside what is retained, reads in order, and ends on the last entry.
#[test]
fn log_retention_lowered_while_a_reader_joins_and_reads() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(|| {
        let mut writer = LogWriter::with_config(LogConfig {
            first_chunk: 1,
            max_chunk: 1,
            retain: None,
        });
        writer.append(0u64);
        writer.append(1);
        let handle = writer.handle();
        let publisher = thread::spawn(move || {
            writer.set_retain(Some(1));
            writer.append(2);
        });
        let mut reader = handle.reader(Start::Oldest);
        let mut position = reader.position();
        let mut last = None;
        loop {
            match block_on(reader.next()) {
                Next::Item(value) => {
                    assert_eq!(value, position, "positions and values agree");
                    position += 1;
                    last = Some(value);
                }
                Next::Lagged(skipped) => position += skipped,
                Next::Closed => break,
            }
        }
        assert_eq!(last, Some(2), "the last entry is always retained");
        publisher.join().unwrap();
    });
}

#[test]
fn the_last_reader_leaving_releases_every_entry() {
    loom::model(|| {
        let token = StdArc::new(());
        let mut writer = LogWriter::with_config(LogConfig {
            first_chunk: 1,
            max_chunk: 1,
            retain: None,
        });
        writer.append(token.clone());
        writer.append(token.clone());
        let first = writer.reader(Start::Oldest);
        let second = first.clone();
        drop(writer);
        let a = thread::spawn(move || drop(first));
        let b = thread::spawn(move || drop(second));
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(StdArc::strong_count(&token), 1);
    });
}
