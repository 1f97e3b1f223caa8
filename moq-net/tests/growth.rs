//! Adversarial state growth: what a peer's history (not its present) could make the relay
//! hold. Each test drives a workload that grew a structure without limit before its fix,
//! and asserts the structure's size, read from the counters the relay exports, stays
//! within a bound set by what is live now.

mod common;

use std::time::Duration;

use common::relay::*;
use common::seeded;
use moqx_net::model::{BroadcastProducer, Origin, Track};

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

/// Review finding F13: every bound was per object, so cooperating sessions could fill
/// track caches × tracks × sessions. Against a relay-wide budget of 4 MiB, a publisher
/// fills 40 tracks (1 MiB of cache each: 40 MiB without the budget) that one subscriber
/// reads: the accounted bytes never pass the budget, caches are shed first, the newest
/// frames still arrive, and once the budget is full a new subscription is refused while
/// every session goes on.
#[test]
fn tracks_times_caches_from_cooperating_sessions_stay_within_the_memory_budget() {
    use moqx_net::model::MemoryBudget;
    use moqx_net::session::SessionConfig;
    seeded(42, |runtime| {
        let budget = MemoryBudget::new(4 << 20);
        let mut relay = Relay::with_config({
            let mut session_config = SessionConfig::default();
            session_config.memory_budget = Some(budget.clone());
            session_config.cache.bytes = Some(1 << 20);
            session_config
        });
        let origin = Origin::new();
        let broadcast = BroadcastProducer::new();
        let mut tracks: Vec<_> = (0..40)
            .map(|index| broadcast.create_track(Track::new(format!("t{index}"))))
            .collect();
        origin.publish("live", &broadcast).unwrap();
        let publisher = relay.connect(runtime, SessionConfig::default().with_publisher(&origin));
        let (subscriber, seen) = subscriber(runtime, &mut relay);
        assert!(runtime.run_until(SECOND, || seen.consume_broadcast("live").is_some()));
        let readers: Vec<_> = (0..40)
            .map(|index| read_track(runtime, &seen, "live", &format!("t{index}")))
            .collect();
        assert!(runtime.run_until(SECOND, || tracks.iter().all(|t| t.consumer_count() > 0)));

        let frame = bytes::Bytes::from(vec![7u8; 64 << 10]);
        let mut most = 0;
        for round in 0..16u64 {
            for track in &mut tracks {
                let mut group = track.append_group();
                group.write(round, frame.clone());
                group.finish();
            }
            runtime.advance(Duration::from_millis(50));
            most = most.max(budget.used());
        }
        runtime.advance(SECOND);
        let stats = budget.stats();
        assert!(
            stats.peak <= stats.limit,
            "accounted {} of {}: {stats:?}",
            stats.peak,
            stats.limit
        );
        assert!(stats.caches_shed > 0, "caches were shed first: {stats:?}");
        // Every track's newest frame arrived.
        for reader in &readers {
            assert!(!reader.frames.borrow().is_empty());
        }
        assert!(most > 0);

        for session in [&publisher, &subscriber] {
            assert!(!session.is_closed(), "no session was closed");
        }
    });
}

/// Past seven eighths of the budget (one group kept open at the relay holds it), a new
/// subscription is refused with BoundsExceeded, and a frame that would pass the limit
/// refuses its group; the sessions go on, and what was subscribed keeps flowing.
#[test]
fn a_full_memory_budget_refuses_new_subscriptions_and_frames_past_it() {
    use moqx_net::Error;
    use moqx_net::model::MemoryBudget;
    use moqx_net::session::SessionConfig;
    seeded(43, |runtime| {
        let budget = MemoryBudget::new(1 << 20);
        let mut relay = Relay::with_config({
            let mut session_config = SessionConfig::default();
            session_config.memory_budget = Some(budget.clone());
            session_config
        });
        let (publisher, broadcast, mut log) = publisher(runtime, &mut relay, "live", "log");
        let mut later = broadcast.create_track(Track::new("later"));
        let (subscriber, seen) = subscriber(runtime, &mut relay);
        assert!(runtime.run_until(SECOND, || seen.consume_broadcast("live").is_some()));
        let reading = read_track(runtime, &seen, "live", "log");
        assert!(runtime.run_until(SECOND, || log.consumer_count() > 0));
        // One open group of 64 KiB frames: 15 of them fill the budget past 7/8.
        let mut open = log.append_group();
        for index in 0..15u64 {
            open.write(index, bytes::Bytes::from(vec![7u8; 64 << 10]));
            runtime.advance(Duration::from_millis(5));
        }
        runtime.advance(SECOND);
        assert!(budget.is_full(), "{:?}", budget.stats());
        assert_eq!(
            reading.frames.borrow().len(),
            15,
            "the running subscription flows"
        );

        let refused = read_track(runtime, &seen, "live", "later");
        runtime.advance(SECOND);
        assert_eq!(
            *refused.end.borrow(),
            Some(Err(Error::BoundsExceeded)),
            "a new subscription is refused"
        );
        assert_eq!(later.consumer_count(), 0);
        // A frame past the limit refuses its group.
        open.write(15, bytes::Bytes::from(vec![7u8; 256 << 10]));
        runtime.advance(SECOND);
        let stats = budget.stats();
        assert!(
            stats.frames_refused >= 1 && stats.subscriptions_refused >= 1,
            "{stats:?}"
        );
        assert!(stats.peak <= stats.limit, "{stats:?}");
        for session in [&publisher, &subscriber] {
            assert!(!session.is_closed(), "no session was closed");
        }
        let _ = later.append_group();
    });
}
