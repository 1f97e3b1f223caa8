//! Adversarial state growth: what a peer's history (not its present) could make the relay
//! hold. Each test drives a workload that grew a structure without limit before its fix,
//! and asserts the structure's size, read from the counters the relay exports, stays
//! within a bound set by what is live now.

mod common;

use std::time::Duration;

use common::relay::*;
use common::seeded;
use moq_net::model::{BroadcastProducer, Origin, Track};

/// Review finding F1: every distinct path announced and withdrawn while an announcement
/// listener was not reading kept an entry in that listener, forever. Sixteen listeners
/// that never read (the most announce streams one session may open) and a publisher
/// churning 100,000 fresh names: what waits for the listeners stays at what is live.
#[test]
fn distinct_path_churn_against_stalled_listeners_holds_only_what_is_live() {
    let origin = Origin::new();
    let listeners: Vec<_> = (0..16).map(|_| origin.announced("room")).collect();
    let kept = BroadcastProducer::new();
    origin.publish("room/kept", &kept).unwrap();
    let mut most_waiting = 0;
    for index in 0..100_000 {
        let churn = BroadcastProducer::new();
        origin
            .publish(format!("room/churn-{index}"), &churn)
            .unwrap();
        drop(churn); // withdrawn
        most_waiting = most_waiting.max(origin.listener_stats().waiting_changes);
    }
    let stats = origin.listener_stats();
    assert_eq!(stats.listeners, listeners.len());
    assert_eq!(stats.waiting_changes, listeners.len(), "one live path each");
    assert!(
        most_waiting <= 2 * listeners.len(),
        "at most the live paths and the one churning: {most_waiting}"
    );
}

/// Review finding F2: the session's queue of open group streams was cleaned only from its
/// front, so one group that stays open (a log, subtitles, a status track) kept an entry
/// for every group sent after it: 24 B per group, forever. Track `log` keeps its group
/// open while 5,000 one-frame groups go out on `chat`.
#[test]
fn one_long_open_group_among_thousands_of_finished_ones_keeps_the_queue_small() {
    seeded(41, |runtime| {
        let mut relay = Relay::new();
        let (_publisher, broadcast, mut chat) = publisher(runtime, &mut relay, "live", "chat");
        let mut log = broadcast.create_track(Track::new("log"));
        let (_subscriber, origin) = subscriber(runtime, &mut relay);
        let toward_subscriber = relay.sessions.last().unwrap().clone();
        assert!(runtime.run_until(SECOND, || origin.consume_broadcast("live").is_some()));
        let chat_received = read_track(runtime, &origin, "live", "chat");
        let log_received = read_track(runtime, &origin, "live", "log");
        assert!(runtime.run_until(SECOND, || chat.consumer_count() > 0
            && log.consumer_count() > 0));

        let mut open = log.append_group();
        open.write(0, "the log opens");
        let mut most_entries = 0;
        for index in 0..5_000u64 {
            send(&mut chat, index, "message");
            runtime.advance(Duration::from_millis(1));
            let counters = toward_subscriber.counters();
            most_entries = most_entries.max(counters.open_group_entries);
        }
        runtime.advance(SECOND);
        assert_eq!(chat_received.frames.borrow().len(), 5_000, "nothing lost");
        assert_eq!(log_received.frames.borrow().len(), 1);
        let counters = toward_subscriber.counters();
        assert_eq!(
            counters.open_group_streams, 1,
            "the log's group is still open"
        );
        assert!(
            most_entries <= 2 * 2 + 64 + 1,
            "the queue held {most_entries} entries for at most two open groups"
        );
        open.finish();
    });
}
