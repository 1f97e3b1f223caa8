//! The log's unit tests (loom models are in `kio/tests/loom.rs`).

use super::*;
use crate::test_util::CountingWaker;

fn drain<T: Clone>(reader: &mut LogReader<T>) -> Vec<Next<T>> {
    std::iter::from_fn(|| reader.try_next().map(Next::cloned)).collect()
}

fn items(range: std::ops::Range<u64>) -> Vec<Next<u64>> {
    range.map(Next::Item).collect()
}

#[test]
fn every_reader_sees_every_entry_in_order_across_chunks() {
    let mut writer = LogWriter::new();
    let mut early = writer.reader(Start::Oldest);
    for i in 0..200u64 {
        writer.append(i);
    }
    let mut late = writer.reader(Start::Oldest);
    assert_eq!(drain(&mut early), items(0..200));
    assert_eq!(drain(&mut late), items(0..200));
}

#[test]
fn a_handle_creates_readers_later_without_pinning_old_entries() {
    let mut writer = LogWriter::with_config(LogConfig {
        first_chunk: 2,
        max_chunk: 2,
        retain: Some(2),
    });
    let handle = writer.handle();
    let first = std::sync::Arc::new(0u64);
    writer.append(first.clone());
    for i in 1..10u64 {
        writer.append(std::sync::Arc::new(i));
    }
    assert_eq!(
        std::sync::Arc::strong_count(&first),
        1,
        "the handle does not keep the first chunk alive"
    );
    let mut reader = handle.reader(Start::Oldest);
    let seen: Vec<u64> = std::iter::from_fn(|| match reader.try_next() {
        Some(Next::Item(item)) => Some(**item),
        _ => None,
    })
    .collect();
    assert_eq!(seen, [8, 9]);
    assert!(!handle.is_closed());
    drop(writer);
    assert!(handle.is_closed());
}

#[test]
fn start_positions() {
    let mut writer = LogWriter::new();
    assert_eq!(writer.reader(Start::Latest).position(), 0);
    for i in 0..10u64 {
        writer.append(i);
    }
    assert_eq!(writer.reader(Start::Oldest).position(), 0);
    assert_eq!(writer.reader(Start::Latest).position(), 9);
    assert_eq!(writer.reader(Start::Next).position(), 10);
    assert_eq!(writer.reader(Start::At(4)).position(), 4);
    assert_eq!(writer.reader(Start::At(99)).position(), 10);
    let mut reader = writer.reader(Start::At(7));
    assert_eq!(drain(&mut reader), items(7..10));
}

#[test]
fn parked_reader_is_woken_by_append_and_by_close() {
    let mut writer = LogWriter::new();
    let mut reader = writer.reader(Start::Next);
    let (waker, count) = CountingWaker::pair();
    let waiter = Waiter::new(&waker);
    assert!(reader.poll_next(&waiter).is_pending());
    writer.append(1);
    assert_eq!(count.count(), 1);
    assert_eq!(reader.poll_next(&waiter), Poll::Ready(Next::Item(&1)));
    assert!(reader.poll_next(&waiter).is_pending());
    drop(writer);
    assert_eq!(count.count(), 2);
    assert_eq!(reader.poll_next(&waiter), Poll::Ready(Next::Closed));
}

#[test]
fn an_entry_appended_before_the_close_is_seen_with_the_end_after_one_wake() {
    let mut writer = LogWriter::new();
    let mut reader = writer.reader(Start::Next);
    let (waker, count) = CountingWaker::pair();
    let waiter = Waiter::new(&waker);
    assert!(reader.poll_next(&waiter).is_pending());
    assert_eq!(writer.append_before_close(7), 0);
    assert_eq!(count.count(), 0, "no wake before the close");
    writer.close();
    assert_eq!(count.count(), 1);
    assert_eq!(reader.poll_next(&waiter), Poll::Ready(Next::Item(&7)));
    assert_eq!(reader.poll_next(&waiter), Poll::Ready(Next::Closed));
}

#[test]
fn reader_at_the_end_of_a_full_chunk_follows_the_next_one() {
    let config = LogConfig {
        first_chunk: 2,
        max_chunk: 2,
        retain: None,
    };
    let mut writer = LogWriter::with_config(config);
    writer.append(0);
    writer.append(1);
    let mut reader = writer.reader(Start::Next);
    assert_eq!(reader.try_next(), None);
    writer.append(2);
    assert_eq!(reader.try_next(), Some(Next::Item(&2)));
}

#[test]
fn retention_bounds_memory_and_late_joiners_start_in_the_window() {
    let config = LogConfig {
        first_chunk: 4,
        max_chunk: 4,
        retain: Some(8),
    };
    let mut writer = LogWriter::with_config(config);
    for i in 0..1000u64 {
        writer.append(i);
    }
    assert!(writer.shared.retained.lock().chunks.len() <= 4);
    let mut reader = writer.reader(Start::Oldest);
    assert_eq!(reader.position(), 992);
    assert_eq!(drain(&mut reader), items(992..1000));
}

#[test]
fn a_smaller_retention_releases_old_chunks_at_once_and_a_larger_one_keeps_more() {
    use std::sync::Arc as StdArc;
    let token = StdArc::new(());
    let mut writer = LogWriter::with_config(LogConfig {
        first_chunk: 2,
        max_chunk: 2,
        retain: None,
    });
    let mut early = writer.reader(Start::Oldest);
    for _ in 0..10 {
        writer.append(token.clone());
    }
    assert_eq!(StdArc::strong_count(&token), 11, "everything kept");
    writer.set_retain(Some(3));
    // Chunks [0, 2) .. [4, 6) lie wholly before the last 3 entries: released now
    // ([0, 2) lives on while `early` reads from it); [6, 8) and [8, 10) remain.
    assert_eq!(writer.shared.retained.lock().chunks.len(), 2);
    assert_eq!(StdArc::strong_count(&token), 1 + 2 + 4);
    assert_eq!(writer.reader(Start::Oldest).position(), 7);
    assert!(matches!(early.try_next(), Some(Next::Item(_))));
    drop(early);
    assert_eq!(StdArc::strong_count(&token), 1 + 4, "chunks [6, 10) remain");
    writer.set_retain(Some(0));
    assert_eq!(
        writer.reader(Start::Oldest).position(),
        9,
        "0 keeps the latest"
    );
    writer.set_retain(None);
    for _ in 0..4 {
        writer.append(token.clone());
    }
    assert_eq!(
        writer.reader(Start::Oldest).position(),
        8,
        "nothing more released"
    );
}

#[test]
fn lag_is_reported_with_the_number_of_skipped_entries() {
    let config = LogConfig {
        first_chunk: 2,
        max_chunk: 2,
        retain: Some(2),
    };
    let mut writer = LogWriter::with_config(config);
    writer.append(0u64);
    let mut slow = writer.reader(Start::Oldest);
    for i in 1..20u64 {
        writer.append(i);
    }
    assert_eq!(slow.try_next(), Some(Next::Item(&0)));
    assert_eq!(slow.try_next(), Some(Next::Item(&1)));
    // Chunk [2, 4) was released; the oldest retained chunk is [18, 20).
    assert_eq!(slow.try_next(), Some(Next::Lagged(16)));
    assert_eq!(drain(&mut slow), items(18..20));
}

#[test]
fn entries_are_dropped_exactly_once() {
    use std::sync::Arc as StdArc;
    let token = StdArc::new(());
    let mut writer = LogWriter::with_config(LogConfig {
        retain: Some(3),
        ..LogConfig::DEFAULT
    });
    let reader = writer.reader(Start::Oldest);
    for _ in 0..500 {
        writer.append(token.clone());
    }
    assert!(
        StdArc::strong_count(&token) < 500,
        "released chunks dropped their entries"
    );
    drop(writer);
    drop(reader);
    assert_eq!(StdArc::strong_count(&token), 1);
}

#[test]
fn async_next_across_threads() {
    let mut writer = LogWriter::new();
    let mut reader = writer.reader(Start::Oldest);
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        while let Next::Item(value) = pollster::block_on(reader.next()) {
            seen.push(value);
        }
        seen
    });
    for i in 0..10_000u64 {
        writer.append(i);
    }
    drop(writer);
    assert_eq!(handle.join().unwrap(), (0..10_000).collect::<Vec<_>>());
}

#[test]
#[should_panic(expected = "first_chunk must be at least 1")]
fn zero_first_chunk_is_refused_by_name() {
    let _ = LogWriter::<()>::with_config(LogConfig {
        first_chunk: 0,
        ..LogConfig::DEFAULT
    });
}
