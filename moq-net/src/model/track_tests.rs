//! Unit tests of `track.rs`.
use super::*;
use std::task::Waker;

/// Regression (found by the issue-24 soak, where it hung a client's two threads): a
/// consumer made of a track whose producer was gone scanned its closed log forever.
/// Joining a finished or dropped track returns, and reads what was cached.
#[test]
fn joining_a_track_whose_producer_is_gone_returns() {
    for finish in [true, false] {
        let mut producer = TrackProducer::new(Track::new("t"));
        let mut group = producer.append_group();
        group.write(0, "last");
        group.finish();
        let source = producer.source();
        if finish {
            producer.finish();
        } else {
            drop(producer);
        }
        let (done, joined) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut consumer = source.consume();
            let _ = done.send(sequences(&mut consumer));
        });
        let (seen, end) = joined
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("consume returns");
        assert_eq!(seen, [0], "finish {finish}");
        let expected = if finish { Ok(()) } else { Err(Error::Dropped) };
        assert_eq!(end, Some(expected), "finish {finish}");
    }
}

fn waiter() -> Waiter {
    Waiter::new(Waker::noop())
}

/// Sequences of the groups a consumer can read now, and how its read ended.
fn sequences(consumer: &mut TrackConsumer) -> (Vec<u64>, Option<Result<(), Error>>) {
    let waiter = waiter();
    let mut seen = Vec::new();
    loop {
        match consumer.poll_next_group(&waiter) {
            Poll::Ready(Ok(Some(group))) => seen.push(group.sequence()),
            Poll::Ready(Ok(None)) => return (seen, Some(Ok(()))),
            Poll::Ready(Err(error)) => return (seen, Some(Err(error))),
            Poll::Pending => return (seen, None),
        }
    }
}

fn group_with_timestamp(track: &mut TrackProducer, sequence: u64, timestamp: u64) {
    let mut group = track.create_group(sequence);
    group.write(timestamp, "x");
    group.finish();
}

#[test]
fn a_consumer_starts_at_the_latest_group_and_receives_newer_ones() {
    let mut track = TrackProducer::new(Track::new("t"));
    for _ in 0..5 {
        track.append_group().finish();
    }
    let mut consumer = track.consume();
    assert_eq!(sequences(&mut consumer), (vec![4], None));
    track.append_group().finish();
    track.append_group().finish();
    assert_eq!(sequences(&mut consumer), (vec![5, 6], None));
}

#[test]
fn latest_means_the_highest_sequence_even_when_groups_arrived_out_of_order() {
    let mut track = TrackProducer::new(Track::new("t"));
    for sequence in [0, 3, 1, 2] {
        track.create_group(sequence).finish();
    }
    assert_eq!(track.latest(), Some(3));
    let mut consumer = track.consume();
    // Starts at 3; 1 and 2, which arrived after it, are older than the start.
    assert_eq!(sequences(&mut consumer), (vec![3], None));
}

#[test]
fn a_consumer_can_start_at_a_given_sequence() {
    let mut track = TrackProducer::new(Track::new("t"));
    for _ in 0..10 {
        track.append_group().finish();
    }
    let mut consumer = track.consume_from(7);
    assert_eq!(sequences(&mut consumer), (vec![7, 8, 9], None));
    track.create_group(2).finish(); // older than the start: skipped
    track.create_group(10).finish();
    assert_eq!(sequences(&mut consumer), (vec![10], None));
}

#[test]
fn a_consumer_can_start_another_at_a_given_sequence() {
    let mut track = TrackProducer::new(Track::new("t"));
    for _ in 0..5 {
        track.append_group().finish();
    }
    let latest = track.consume();
    let mut from_two = latest.consume_from(2);
    assert_eq!(sequences(&mut from_two), (vec![2, 3, 4], None));
    assert_eq!(track.consumer_count(), 2);
}

#[test]
fn groups_may_complete_out_of_order() {
    let mut track = TrackProducer::new(Track::new("t"));
    let mut consumer = track.consume();
    let mut first = track.append_group();
    let mut second = track.append_group();
    let waiter = waiter();
    let Poll::Ready(Ok(Some(mut g0))) = consumer.poll_next_group(&waiter) else {
        panic!("group 0 is delivered before it completes");
    };
    let Poll::Ready(Ok(Some(mut g1))) = consumer.poll_next_group(&waiter) else {
        panic!("group 1 is delivered before it completes");
    };
    second.write(1, "second");
    second.finish();
    assert_eq!(
        g1.poll_read_frame(&waiter)
            .map(|f| f.unwrap().unwrap().payload),
        Poll::Ready("second".into())
    );
    assert!(
        g0.poll_read_frame(&waiter).is_pending(),
        "group 0 still open"
    );
    first.write(0, "first");
    first.finish();
    assert_eq!(
        g0.poll_read_frame(&waiter)
            .map(|f| f.unwrap().unwrap().payload),
        Poll::Ready("first".into())
    );
}

#[test]
fn a_byte_budget_keeps_only_the_newest_groups_that_fit_and_regrows_after_a_big_one() {
    let mut config = Track::new("t");
    config.cache_bytes = Some(1000);
    let mut track = TrackProducer::new(config);
    let write = |track: &mut TrackProducer, bytes: usize| {
        let mut group = track.append_group();
        group.write(0, vec![0u8; bytes]);
        group.finish();
    };
    for _ in 0..10 {
        write(&mut track, 400);
    }
    // When group 9 started, 8 and 7 (800 bytes) fit and 6 did not.
    let (seen, _) = sequences(&mut track.consume_from(0));
    assert_eq!(seen, [7, 8, 9]);

    write(&mut track, 5000); // 10: larger than the whole budget
    write(&mut track, 10); // 11 starts: 10 alone is over, it goes
    let (seen, _) = sequences(&mut track.consume_from(0));
    assert_eq!(seen, [11], "the latest group is kept whatever its size");
    for _ in 0..3 {
        write(&mut track, 10);
    }
    let (seen, _) = sequences(&mut track.consume_from(0));
    assert_eq!(seen, [11, 12, 13, 14], "small groups fit again");
}

#[test]
fn without_a_byte_budget_groups_count_no_bytes() {
    let mut track = TrackProducer::new(Track::new("t"));
    let mut group = track.append_group();
    group.write(0, vec![0u8; 100]);
    assert_eq!(group.size().bytes(), 0);
    assert!(track.budget.is_none());
}

#[test]
fn a_slow_consumer_skips_to_cached_groups_and_sees_that_it_lagged() {
    let mut config = Track::new("t");
    config.cache_groups = 4;
    let mut track = TrackProducer::new(config);
    track.append_group().finish();
    let mut slow = track.consume();
    for _ in 0..1000 {
        track.append_group().finish();
    }
    let (seen, end) = sequences(&mut slow);
    assert_eq!(end, None);
    assert_eq!(seen.last(), Some(&1000), "caught up with the newest group");
    assert!(
        seen.len() < 100,
        "skipped instead of reading 1000 groups: {}",
        seen.len()
    );
    assert_eq!(
        slow.lagged() + seen.len() as u64,
        1001,
        "every group read or counted"
    );
    assert!(slow.lagged() > 900);
}

/// Regression: a late joiner was handed a group older than the latest one when that
/// group was created after it (the conformance suite saw it over WebTransport).
#[test]
fn a_late_joiner_skips_older_groups_created_after_it_joined() {
    let mut track = TrackProducer::new(Track::new("t"));
    track.create_group(0).finish();
    track.create_group(2).finish();
    let mut late = track.consume();
    track.create_group(1).finish(); // in flight when the consumer joined
    track.create_group(3).finish();
    assert_eq!(sequences(&mut late), (vec![2, 3], None));
}

#[test]
fn expired_groups_are_skipped_by_timestamp_age() {
    let mut config = Track::new("t");
    config.max_latency = Duration::from_millis(100); // timescale 1000: 100 ticks
    let mut track = TrackProducer::new(config);
    let mut consumer = track.consume_from(0);
    group_with_timestamp(&mut track, 0, 1_000);
    group_with_timestamp(&mut track, 1, 1_050);
    group_with_timestamp(&mut track, 2, 1_200); // 0 and 1 are now more than 100 behind
    let (seen, _) = sequences(&mut consumer);
    assert_eq!(seen, [2]);
    assert_eq!(consumer.lagged(), 2);
}

#[test]
fn the_latest_group_and_empty_groups_never_expire_by_timestamp() {
    let mut config = Track::new("t");
    config.max_latency = Duration::ZERO;
    let mut track = TrackProducer::new(config);
    let mut consumer = track.consume_from(0);
    track.create_group(0).finish(); // no frames: no timestamp
    group_with_timestamp(&mut track, 1, 500);
    let (seen, _) = sequences(&mut consumer);
    assert_eq!(seen, [0, 1]);
}

#[test]
fn the_producer_sees_the_last_consumer_leave() {
    let track = TrackProducer::new(Track::new("t"));
    let waiter = waiter();
    let first = track.consume();
    let second = first.clone();
    assert_eq!(track.consumer_count(), 2);
    assert!(track.poll_unused(&waiter).is_pending());
    drop(first);
    assert!(track.poll_unused(&waiter).is_pending());
    drop(second);
    assert!(track.poll_unused(&waiter).is_ready());
}

#[test]
fn finish_abort_and_drop_are_distinct_ends() {
    let finished = TrackProducer::new(Track::new("t"));
    let mut a = finished.consume();
    finished.finish();
    assert_eq!(sequences(&mut a).1, Some(Ok(())));

    let aborted = TrackProducer::new(Track::new("t"));
    let mut b = aborted.consume();
    aborted.abort(Error::NotFound);
    assert_eq!(sequences(&mut b).1, Some(Err(Error::NotFound)));

    let mut dropped = TrackProducer::new(Track::new("t"));
    dropped.append_group().finish();
    let mut c = dropped.consume();
    drop(dropped);
    assert_eq!(sequences(&mut c), (vec![0], Some(Err(Error::Dropped))));
}

#[test]
fn a_parked_consumer_is_woken_by_a_new_group_on_another_thread() {
    let mut track = TrackProducer::new(Track::new("t"));
    let mut consumer = track.consume();
    let handle = std::thread::spawn(move || {
        pollster::block_on(async {
            let mut sequences = Vec::new();
            while let Some(group) = consumer.next_group().await.unwrap() {
                sequences.push(group.sequence());
            }
            sequences
        })
    });
    for _ in 0..100 {
        track.append_group().finish();
    }
    track.finish();
    let seen = handle.join().unwrap();
    assert_eq!(seen.last(), Some(&99));
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
}
