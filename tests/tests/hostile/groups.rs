//! Hostile groups: subscribers that withhold credit, publishers whose groups break a bound,
//! and caches that must stay within the relay's memory budget.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use moq_conformance::hostile::{HostileClient, HostileConfig};
use moq_conformance::strict::wire::Subscribe;
use moqx_net::model::{BroadcastProducer, Origin, Track, TrackProducer};
use moqx_net::session::SessionConfig;

use super::bed::{Bed, PATIENCE, until_received};
use super::raw::{SETUP, evil_publisher, evil_reader, frame, group_header};

/// Regression: a subscriber that gives no stream credit (MAX_STREAMS_UNI never raised)
/// made the relay queue every group it was sent. The oldest waiting groups are dropped,
/// counted, and the others keep delivering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_withholding_stream_credit_loses_groups_and_others_do_not() {
    // Two uni streams in all: the relay's SETUP and one group.
    stingy_subscriber(HostileConfig {
        max_streams_uni: 2,
        ..HostileConfig::default()
    })
    .await;
}

/// Review finding: a subscriber that lets group streams open but gives them no data
/// credit kept every group alive in its unfinished stream. Past
/// `max_queued_groups_per_session` open groups, the oldest is reset (Lagged), counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_withholding_data_credit_loses_groups_and_others_do_not() {
    // Streams aplenty, and not a byte of data credit.
    stingy_subscriber(HostileConfig {
        max_streams_uni: 1000,
        window: 0,
        ..HostileConfig::default()
    })
    .await;
}

/// A subscriber of the good track whose transport is `config` and which never reads,
/// while 200 messages are delivered to the good subscriber: at most
/// `max_queued_groups_per_session` (16) of its groups may be kept, the rest are dropped.
async fn stingy_subscriber(config: HostileConfig) {
    let mut bed = Bed::start(|config| config.limits.max_queued_groups_per_session = 16).await;
    let relay = bed.relay;
    let served = bed.metric("subscriptions_total");
    let (subscribed_tx, subscribed_rx) = tokio::sync::oneshot::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    // Spawned now (not awaited): it runs beside the publishing below.
    let stingy = tokio::task::spawn_blocking(move || {
        let mut client = HostileClient::connect(relay, &config);
        client.write(2, SETUP, true);
        let mut subscribe = vec![0x02];
        subscribe.extend(
            Subscribe {
                id: 0,
                broadcast: "good".into(),
                track: "chat".into(),
                priority: 0,
                ordered: 0,
                max_latency: 0,
                start: 0,
                end: 0,
            }
            .encode(),
        );
        client.write(0, &subscribe, false);
        client.drive(Duration::from_millis(100), |_| false);
        let _ = subscribed_tx.send(());
        // Keep the connection alive (acknowledging, never reading) until the test is done.
        client.drive(PATIENCE * 2, |_| done_rx.try_recv().is_ok());
        client
    });
    // Awaited, not blocked on: a blocked worker would stall the relay's tasks.
    tokio::time::timeout(PATIENCE, subscribed_rx)
        .await
        .expect("the stingy subscriber subscribed")
        .unwrap();
    // Taken by the relay (with no credit, the subscriber cannot read its answer).
    let now_served = bed
        .metric_once("subscriptions_total", |now| now > served)
        .await;
    assert!(now_served > served, "the relay never took the subscription");
    for i in 0..200 {
        bed.delivers(&format!("message {i}")).await;
    }
    let bound = 200 - 2 * 16 - 2;
    let dropped = bed
        .metric_once("groups_dropped_total", |dropped| dropped >= bound)
        .await;
    done_tx.send(()).unwrap();
    drop(stingy.await.unwrap());
    assert!(
        dropped >= bound,
        "the stingy subscriber's oldest groups were dropped: {dropped}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_at_the_largest_sequence_is_refused_alone() {
    let mut bed = Bed::start(|_| {}).await;
    let relay = bed.relay;
    let (to_test, mut from_hostile) = tokio::sync::mpsc::unbounded_channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let publisher = tokio::task::spawn_blocking(move || {
        let mut client = HostileClient::connect(relay, &HostileConfig::default());
        let subscribe = evil_publisher(&mut client);
        // The largest sequence there is: SUBSCRIBE_END could not say what follows it.
        let last = client.open_uni();
        let mut group = group_header(subscribe, (1 << 62) - 1);
        group.extend(frame(b"the last sequence"));
        client.write(last, &group, true);
        client.drive(Duration::from_millis(300), |_| false);
        let _ = to_test.send(());
        client.drive(PATIENCE, |_| go_rx.try_recv().is_ok());
        // Then an ordinary group.
        let next = client.open_uni();
        let mut group = group_header(subscribe, 1);
        group.extend(frame(b"an ordinary group"));
        client.write(next, &group, true);
        client.closed_with(Duration::from_secs(2))
    });
    let (subscriber, received) = evil_reader(&bed).await;
    tokio::time::timeout(PATIENCE, from_hostile.recv())
        .await
        .expect("the hostile group went out");
    go_tx.send(()).unwrap();
    until_received(&received, "an ordinary group").await;
    assert!(
        !received
            .lock()
            .unwrap()
            .contains(&"the last sequence".to_owned()),
        "the group at the largest sequence was refused"
    );
    assert_eq!(
        publisher.await.unwrap(),
        None,
        "the publisher is not closed for it"
    );
    assert!(!subscriber.is_closed(), "nor is its subscriber");
    bed.delivers("after the largest sequence").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_group_is_refused_past_its_bound_and_the_next_one_flows() {
    let mut bed = Bed::start(|config| config.limits.max_group_frames = 8).await;
    let relay = bed.relay;
    let (to_test, mut from_hostile) = tokio::sync::mpsc::unbounded_channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let publisher = tokio::task::spawn_blocking(move || {
        let mut client = HostileClient::connect(relay, &HostileConfig::default());
        let subscribe = evil_publisher(&mut client);
        // A group that never ends: 100 frames, no FIN.
        let endless = client.open_uni();
        let mut group = group_header(subscribe, 0);
        for i in 0..100 {
            group.extend(frame(format!("endless {i}").as_bytes()));
        }
        client.write(endless, &group, false);
        client.drive(Duration::from_millis(300), |_| false);
        let _ = to_test.send(());
        client.drive(PATIENCE, |_| go_rx.try_recv().is_ok());
        let next = client.open_uni();
        let mut group = group_header(subscribe, 1);
        group.extend(frame(b"the next group"));
        client.write(next, &group, true);
        client.closed_with(Duration::from_secs(2))
    });
    let (subscriber, received) = evil_reader(&bed).await;
    tokio::time::timeout(PATIENCE, from_hostile.recv())
        .await
        .expect("the endless group went out");
    go_tx.send(()).unwrap();
    until_received(&received, "the next group").await;
    let endless = received
        .lock()
        .unwrap()
        .iter()
        .filter(|text| text.starts_with("endless"))
        .count();
    assert!(
        endless <= 8,
        "at most the bound's frames of the endless group: {endless}"
    );
    assert_eq!(
        bed.metric_once("groups_refused_total", |refused| refused >= 1)
            .await,
        1
    );
    assert_eq!(
        publisher.await.unwrap(),
        None,
        "the publisher is not closed for it"
    );
    assert!(!subscriber.is_closed());
    bed.delivers("after the endless group").await;
}

/// Growth (review finding F13): against a relay-wide budget of 8 MiB, a publisher sends 40
/// tracks 12 groups of 64 KiB each (30 MiB, all of it cached without the budget) that one
/// subscriber reads. The accounted bytes never pass the budget, caches are shed first, every
/// group is delivered or counted where it was lost, and the good pair keeps delivering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_times_tracks_stay_within_the_relays_memory_budget() {
    let mut bed = Bed::start(|config| config.limits.max_memory_bytes = Some(8 << 20)).await;
    let published = Origin::new();
    let broadcast = BroadcastProducer::new();
    let mut tracks: Vec<TrackProducer> = (0..40)
        .map(|index| broadcast.create_track(Track::new(format!("t{index}"))))
        .collect();
    published.publish("bulk", &broadcast).unwrap();
    let publisher = bed
        .client(SessionConfig::default().with_publisher(&published))
        .await;
    let seen = Origin::new();
    let _subscriber = bed
        .client(SessionConfig::default().with_subscriber(&seen))
        .await;
    let bulk = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Some(bulk) = seen.consume_broadcast("bulk") {
                return bulk;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("announced");
    // What the subscriber read, and the groups its own cache released before it read them.
    let frames = Arc::new(AtomicU64::new(0));
    let lagged = Arc::new(AtomicU64::new(0));
    for index in 0..40 {
        let (bulk, frames, lagged) = (bulk.clone(), frames.clone(), lagged.clone());
        tokio::spawn(async move {
            let Ok(mut track) = bulk.subscribe_track(&format!("t{index}")).await else {
                return;
            };
            let mut seen_lag = 0;
            while let Ok(Some(mut group)) = track.next_group().await {
                lagged.fetch_add(track.lagged() - seen_lag, Ordering::Relaxed);
                seen_lag = track.lagged();
                while let Ok(Some(_)) = group.read_frame().await {
                    frames.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    tokio::time::timeout(PATIENCE, async {
        while tracks.iter().any(|track| track.consumer_count() == 0) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("every track is subscribed");
    let payload = bytes::Bytes::from(vec![7u8; 64 << 10]);
    const ROUNDS: u64 = 12;
    for round in 0..ROUNDS {
        for track in &mut tracks {
            let mut group = track.append_group();
            group.write(round, payload.clone());
            group.finish();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Every frame (one a group) reached the subscriber or was counted where it was lost:
    // refused at the budget; dropped or skipped by the publisher or the relay for a peer
    // that did not keep up (on a busy machine); released by the subscriber's own cache.
    let all = 40 * ROUNDS;
    let accounted = |bed: &Bed| {
        let sent = publisher.counters();
        [
            ("delivered", frames.load(Ordering::Relaxed)),
            ("lagged", lagged.load(Ordering::Relaxed)),
            ("refused", bed.metric("memory_frames_refused_total")),
            ("relay dropped", bed.metric("groups_dropped_total")),
            ("relay skipped", bed.metric("groups_skipped_total")),
            ("publisher dropped", sent.groups_dropped),
            ("publisher skipped", sent.groups_skipped),
        ]
    };
    // A slow machine takes longer, so only a wait without progress fails.
    let total = |bed: &Bed| accounted(bed).iter().map(|(_, count)| count).sum::<u64>();
    let mut progress = (0, tokio::time::Instant::now());
    while total(&bed) < all {
        let now = total(&bed);
        if now > progress.0 {
            progress = (now, tokio::time::Instant::now());
        }
        assert!(
            progress.1.elapsed() < PATIENCE,
            "the bulk arrived or was counted: {:?} of {all}",
            accounted(&bed)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bed.delivers("after the bulk").await;
    let (peak, budget, shed) = (
        bed.metric("memory_accounted_peak_bytes"),
        bed.metric("memory_budget_bytes"),
        bed.metric("memory_caches_shed_total"),
    );
    assert_eq!(budget, 8 << 20);
    // Checks and charges are separate steps on each worker: past the limit by at most a
    // frame per worker thread.
    assert!(
        peak <= budget + 2 * (64 << 10),
        "accounted {peak} of {budget}"
    );
    assert!(
        shed > 0,
        "caches were shed first: {}",
        bed.metrics_text()
            .lines()
            .filter(|line| line.starts_with("moq_relay_memory"))
            .collect::<Vec<_>>()
            .join("; ")
    );
    assert!(frames.load(Ordering::Relaxed) > 0);
}
