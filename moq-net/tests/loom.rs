//! Loom models of the model's concurrent paths: groups and tracks over `moqx_kio::log`, with
//! their status and timestamp atomics, and a broadcast handing out a track while its
//! producer retires it.
//!
//! Run with `cargo xtask loom` (which sets `RUSTFLAGS="--cfg loom"` and a preemption bound).
//! The model takes its atomics from `moqx_kio::sync`, so these run the real code. A lost wakeup
//! shows up as a loom deadlock report, because `loom::future::block_on` parks until woken.
#![cfg(loom)]

use loom::future::block_on;
use loom::sync::Arc;
use loom::thread;
use moqx_net::Error;
use moqx_net::model::{GroupConsumer, GroupProducer, Track, TrackProducer};

/// Every frame payload of a group, then how it ended.
async fn read_group(group: &mut GroupConsumer) -> (Vec<String>, Result<(), Error>) {
    let mut payloads = Vec::new();
    loop {
        match group.read_frame().await {
            Ok(Some(frame)) => payloads.push(String::from_utf8_lossy(&frame.payload).into()),
            Ok(None) => return (payloads, Ok(())),
            Err(error) => return (payloads, Err(error)),
        }
    }
}

#[test]
fn a_frame_published_while_a_group_reader_parks_is_read_then_the_end() {
    loom::model(|| {
        let mut group = GroupProducer::new(0);
        let mut reader = group.consume();
        let writer = thread::spawn(move || {
            group.write(7, "x");
            group.finish();
        });
        let (payloads, end) = block_on(read_group(&mut reader));
        assert_eq!(payloads, ["x"]);
        assert_eq!(end, Ok(()));
        assert_eq!(reader.first_timestamp(), Some(7));
        writer.join().unwrap();
    });
}

#[test]
fn a_group_dropped_while_a_reader_parks_reports_dropped_not_finished() {
    loom::model(|| {
        let mut group = GroupProducer::new(0);
        let mut reader = group.consume();
        let writer = thread::spawn(move || {
            group.write(0, "x");
            drop(group);
        });
        let (payloads, end) = block_on(read_group(&mut reader));
        assert_eq!(payloads, ["x"]);
        assert_eq!(end, Err(Error::Dropped));
        writer.join().unwrap();
    });
}

#[test]
fn a_reader_joining_while_the_group_finishes_sees_every_frame_and_the_end() {
    loom::model(|| {
        let mut track = TrackProducer::new(Track::new("t"));
        let mut group = track.append_group();
        group.write(1, "a");
        let track = Arc::new(track);
        let writer = thread::spawn(move || {
            group.write(2, "b");
            group.finish();
        });
        let joiner = {
            let track = track.clone();
            thread::spawn(move || {
                let mut consumer = track.consume();
                block_on(async {
                    let mut group = consumer.next_group().await.unwrap().unwrap();
                    read_group(&mut group).await
                })
            })
        };
        let (payloads, end) = joiner.join().unwrap();
        assert_eq!(payloads, ["a", "b"]);
        assert_eq!(end, Ok(()));
        writer.join().unwrap();
    });
}

#[test]
fn a_new_group_and_the_track_end_wake_a_parked_track_reader() {
    loom::model(|| {
        let mut track = TrackProducer::new(Track::new("t"));
        let mut reader = track.consume();
        let writer = thread::spawn(move || {
            track.append_group().finish();
            track.finish();
        });
        block_on(async {
            let group = reader.next_group().await.unwrap().unwrap();
            assert_eq!(group.sequence(), 0);
            assert_eq!(reader.next_group().await.map(|g| g.is_some()), Ok(false));
        });
        writer.join().unwrap();
    });
}

#[test]
fn the_last_track_reader_leaving_wakes_the_producer() {
    loom::model(|| {
        let track = TrackProducer::new(Track::new("t"));
        let readers = [track.consume(), track.consume()];
        let threads: Vec<_> = readers
            .into_iter()
            .map(|reader| thread::spawn(move || drop(reader)))
            .collect();
        block_on(track.unused());
        assert_eq!(track.consumer_count(), 0);
        for thread in threads {
            thread.join().unwrap();
        }
    });
}

/// A subscriber taking a listed track while its producer retires it: either the producer
/// sees the new consumer and keeps the track, or the subscriber does not get the retired
/// track (it asks again). Never a consumer of a track its producer gave up.
#[test]
fn a_track_is_never_handed_out_while_it_is_retired() {
    use moqx_net::model::BroadcastProducer;
    loom::model(|| {
        let broadcast = BroadcastProducer::new();
        let track = broadcast.create_track(Track::new("t"));
        let consumer = broadcast.consume();
        let subscriber = thread::spawn(move || {
            let pending = consumer.subscribe_track("t");
            block_on(async { pending.await.ok() })
        });
        let retired = track.retire_if_unused();
        let got = subscriber.join().unwrap();
        if retired {
            assert!(got.is_none(), "a retired track was handed out");
        } else {
            assert!(
                got.is_some(),
                "the track was kept for a subscriber that got none"
            );
        }
        drop(got);
        drop(track);
    });
}
