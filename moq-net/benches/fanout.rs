//! In-process fanout through the model: one publisher, N subscribers, every frame delivered to
//! every subscriber. This is the relay's per-message CPU with the network taken out.
//!
//! ```text
//! cargo bench -p moqx-net --bench fanout     # wall-clock: median ns per delivered frame
//! cargo xtask bench --instructions          # instructions per delivered frame (callgrind)
//! ```
//!
//! Two shapes, each with N ∈ {1, 64, 1000} subscribers:
//!
//! - **chat**: 100-byte frames, one frame per group. A round is one group: the publisher
//!   creates it, writes the frame and finishes it; every subscriber is woken, takes the
//!   group, reads the frame, sees the group's end and parks on the track again.
//! - **media**: 4 KB frames, 30 per group. A round is one group: every subscriber takes the
//!   group, then for each frame the publisher writes it and every subscriber reads it and
//!   parks on the group again; then the group ends.
//!
//! An operation is one frame delivered to one subscriber. Payloads are one shared `Bytes`
//! per shape (a relay receives each payload once and shares it), so the figures are the
//! model's cost, not the allocator's. Subscribers are single-threaded and wakers only count,
//! so the rounds are deterministic and callgrind counts are exact.
//!
//! The command line is `bench-harness`'s (`--list`, `--only NAME --rounds K`, or a filter).
#![allow(missing_docs)]

use std::hint::black_box;
use std::task::Poll;

use bench_harness::{Bench, counting_waker};
use bytes::Bytes;
use moqx_kio::Waiter;
use moqx_net::model::{GroupConsumer, Track, TrackConsumer, TrackProducer};

const CHAT_FRAME: usize = 100;
const MEDIA_FRAME: usize = 4096;
const MEDIA_FRAMES_PER_GROUP: u64 = 30;

fn main() {
    let mut benches = Vec::new();
    for subscribers in [1, 64, 1000] {
        benches.push(Bench::new(
            format!("chat: 100 B x1/group to {subscribers}"),
            subscribers,
            "delivery",
            move || chat(subscribers as usize),
        ));
    }
    for subscribers in [1, 64, 1000] {
        benches.push(Bench::new(
            format!("media: 4 KB x30/group to {subscribers}"),
            subscribers * MEDIA_FRAMES_PER_GROUP,
            "delivery",
            move || media(subscribers as usize),
        ));
    }
    bench_harness::main(benches);
}

/// A subscriber: its track reader, the group it is reading, and its waiter.
struct Subscriber {
    track: TrackConsumer,
    group: Option<GroupConsumer>,
    waiter: Waiter,
}

impl Subscriber {
    /// Takes the next group, which must be there.
    fn take_group(&mut self) {
        let Poll::Ready(Ok(Some(group))) = self.track.poll_next_group(&self.waiter) else {
            panic!("a woken subscriber finds the new group");
        };
        self.group = Some(group);
    }

    /// Reads the next frame, which must be there, then parks on the group again.
    fn read_frame(&mut self) {
        let group = self.group.as_mut().expect("reading a group");
        let Poll::Ready(Ok(Some(frame))) = group.poll_read_frame(&self.waiter) else {
            panic!("a woken subscriber finds the new frame");
        };
        black_box(frame);
    }

    /// Sees the end of the group, then parks on the track.
    fn finish_group(&mut self) {
        let mut group = self.group.take().expect("reading a group");
        assert!(matches!(
            group.poll_read_frame(&self.waiter),
            Poll::Ready(Ok(None))
        ));
        assert!(self.track.poll_next_group(&self.waiter).is_pending());
    }
}

fn subscribers(track: &TrackProducer, count: usize) -> Vec<Subscriber> {
    let waker = counting_waker();
    (0..count)
        .map(|_| {
            let mut subscriber = Subscriber {
                track: track.consume(),
                group: None,
                waiter: Waiter::new(&waker),
            };
            assert!(
                subscriber
                    .track
                    .poll_next_group(&subscriber.waiter)
                    .is_pending()
            );
            subscriber
        })
        .collect()
}

fn chat(count: usize) -> impl FnMut() {
    let mut track = TrackProducer::new(Track::new("chat"));
    let mut subscribers = subscribers(&track, count);
    let payload = Bytes::from(vec![b'x'; CHAT_FRAME]);
    let mut timestamp = 0;
    move || {
        let mut group = track.append_group();
        group.write(timestamp, payload.clone());
        group.finish();
        for subscriber in &mut subscribers {
            subscriber.take_group();
            subscriber.read_frame();
            subscriber.finish_group();
        }
        timestamp += 1;
    }
}

fn media(count: usize) -> impl FnMut() {
    let mut track = TrackProducer::new(Track::new("video"));
    let mut subscribers = subscribers(&track, count);
    let payload = Bytes::from(vec![b'v'; MEDIA_FRAME]);
    let mut timestamp = 0;
    move || {
        let mut group = track.append_group();
        for subscriber in &mut subscribers {
            subscriber.take_group();
            let parked = subscriber
                .group
                .as_mut()
                .expect("just taken")
                .poll_read_frame(&subscriber.waiter);
            assert!(parked.is_pending());
        }
        for _ in 0..MEDIA_FRAMES_PER_GROUP {
            group.write(timestamp, payload.clone());
            for subscriber in &mut subscribers {
                subscriber.read_frame();
                let parked = subscriber
                    .group
                    .as_mut()
                    .expect("reading")
                    .poll_read_frame(&subscriber.waiter);
                assert!(parked.is_pending());
            }
            timestamp += 33;
        }
        group.finish();
        for subscriber in &mut subscribers {
            subscriber.finish_group();
        }
    }
}
