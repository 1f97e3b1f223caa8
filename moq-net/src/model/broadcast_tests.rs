//! Unit tests of `broadcast.rs`.
use super::*;
use std::task::Waker;

fn waiter() -> Waiter {
    Waiter::new(Waker::noop())
}

fn resolved(pending: &mut PendingTrack) -> Option<Result<TrackConsumer, Error>> {
    match pending.poll_track(&waiter()) {
        Poll::Ready(result) => Some(result),
        Poll::Pending => None,
    }
}

fn requested(broadcast: &BroadcastProducer) -> Option<TrackRequest> {
    match broadcast.poll_requested_track(&waiter()) {
        Poll::Ready(request) => request,
        Poll::Pending => None,
    }
}

#[test]
fn a_live_track_resolves_at_once_and_unknown_ones_are_not_found() {
    let broadcast = BroadcastProducer::new();
    let _video = broadcast.create_track(Track::new("video"));
    let consumer = broadcast.consume();
    let track = resolved(&mut consumer.subscribe_track("video"))
        .unwrap()
        .unwrap();
    assert_eq!(track.track().name, "video");
    assert!(matches!(
        resolved(&mut consumer.subscribe_track("audio")),
        Some(Err(Error::NotFound))
    ));
    assert!(
        requested(&broadcast).is_none(),
        "a static broadcast queues nothing"
    );
}

#[test]
fn concurrent_requests_for_one_track_make_one_request() {
    let broadcast = BroadcastProducer::on_demand();
    let consumer = broadcast.consume();
    let mut first = consumer.subscribe_track("captions");
    let mut second = consumer.clone().subscribe_track("captions");
    assert!(resolved(&mut first).is_none());

    let request = requested(&broadcast).expect("one request");
    assert!(requested(&broadcast).is_none(), "deduplicated");
    assert_eq!(request.name(), "captions");
    assert_eq!(request.waiting(), 2);

    let mut renamed = Track::new("ignored");
    renamed.priority = 7;
    let mut captions = request.serve(renamed);
    assert_eq!(
        captions.track().name,
        "captions",
        "served under the requested name"
    );
    captions.append_group().finish();

    let mut a = resolved(&mut first).unwrap().unwrap();
    let b = resolved(&mut second).unwrap().unwrap();
    assert_eq!(a.track().priority, 7);
    assert_eq!(b.track().name, "captions");
    assert!(matches!(
        a.poll_next_group(&waiter()),
        Poll::Ready(Ok(Some(_)))
    ));
    assert!(
        matches!(resolved(&mut first), Some(Err(Error::Cancel))),
        "resolves once"
    );

    // Now live: a third subscriber resolves at once without a new request.
    assert!(
        resolved(&mut consumer.subscribe_track("captions"))
            .unwrap()
            .is_ok()
    );
    assert!(requested(&broadcast).is_none());
}

#[test]
fn a_rejected_or_dropped_request_fails_its_subscribers_and_can_be_asked_again() {
    let broadcast = BroadcastProducer::on_demand();
    let consumer = broadcast.consume();

    let mut pending = consumer.subscribe_track("a");
    requested(&broadcast).unwrap().reject(Error::Unauthorized);
    assert!(matches!(
        resolved(&mut pending),
        Some(Err(Error::Unauthorized))
    ));

    let mut pending = consumer.subscribe_track("a");
    drop(requested(&broadcast).expect("asked again after the rejection"));
    assert!(matches!(resolved(&mut pending), Some(Err(Error::NotFound))));
}

#[test]
fn a_served_track_is_unused_once_its_subscribers_leave_and_unlisted_when_it_ends() {
    let broadcast = BroadcastProducer::on_demand();
    let consumer = broadcast.consume();
    let mut pending = consumer.subscribe_track("t");
    let track = requested(&broadcast).unwrap().serve(Track::new("t"));
    assert!(
        track.poll_unused(&waiter()).is_pending(),
        "a subscriber that has not polled yet still counts"
    );
    let subscriber = resolved(&mut pending).unwrap().unwrap();
    drop(pending);
    assert_eq!(track.consumer_count(), 1);
    drop(subscriber);
    assert!(
        track.poll_unused(&waiter()).is_ready(),
        "upstream can cancel"
    );

    track.finish();
    let mut again = consumer.subscribe_track("t");
    assert!(
        resolved(&mut again).is_none(),
        "no longer listed: requested anew"
    );
    assert_eq!(requested(&broadcast).unwrap().name(), "t");
}

#[test]
fn a_request_nobody_waits_for_any_more_shows_zero_waiting() {
    let broadcast = BroadcastProducer::on_demand();
    let pending = broadcast.consume().subscribe_track("t");
    drop(pending);
    assert_eq!(requested(&broadcast).unwrap().waiting(), 0);
}

#[test]
fn dropping_the_producer_fails_pending_and_new_requests_and_closes_consumers() {
    let broadcast = BroadcastProducer::on_demand();
    let consumer = broadcast.consume();
    let mut queued = consumer.subscribe_track("queued");
    let track = broadcast.create_track(Track::new("live"));
    let mut live = resolved(&mut consumer.subscribe_track("live"))
        .unwrap()
        .unwrap();
    assert!(consumer.poll_closed(&waiter()).is_pending());

    drop(broadcast);
    assert!(consumer.is_closed());
    assert!(consumer.poll_closed(&waiter()).is_ready());
    assert!(matches!(resolved(&mut queued), Some(Err(Error::NotFound))));
    assert!(matches!(
        resolved(&mut consumer.subscribe_track("live")),
        Some(Err(Error::NotFound))
    ));
    // Tracks already created live on until their own producers end.
    assert!(live.poll_next_group(&waiter()).is_pending());
    track.finish();
    assert!(matches!(
        live.poll_next_group(&waiter()),
        Poll::Ready(Ok(None))
    ));
}

#[test]
fn consumers_see_the_route_the_broadcast_took() {
    let broadcast = BroadcastProducer::new();
    let consumer = broadcast.consume();
    assert!(consumer.hops().is_empty(), "published here");
    broadcast.set_hops(vec![7, 9]);
    assert_eq!(consumer.hops(), [7, 9]);
}

#[test]
fn the_producer_sees_its_last_consumer_leave() {
    let broadcast = BroadcastProducer::new();
    let first = broadcast.consume();
    let second = first.clone();
    assert_eq!(broadcast.consumer_count(), 2);
    drop(first);
    assert!(broadcast.poll_unused(&waiter()).is_pending());
    drop(second);
    assert!(broadcast.poll_unused(&waiter()).is_ready());
}

#[test]
fn creating_a_track_again_replaces_it_for_new_subscribers_only() {
    let broadcast = BroadcastProducer::new();
    let consumer = broadcast.consume();
    let mut old = broadcast.create_track(Track::new("t"));
    let mut old_reader = resolved(&mut consumer.subscribe_track("t"))
        .unwrap()
        .unwrap();
    let mut new = broadcast.create_track(Track::new("t"));
    new.create_group(100).finish();
    old.append_group().finish();

    let mut new_reader = resolved(&mut consumer.subscribe_track("t"))
        .unwrap()
        .unwrap();
    let group = |reader: &mut TrackConsumer| match reader.poll_next_group(&waiter()) {
        Poll::Ready(Ok(Some(group))) => group.sequence(),
        other => panic!("expected a group, got {other:?}"),
    };
    assert_eq!(group(&mut new_reader), 100);
    assert_eq!(group(&mut old_reader), 0);

    // Dropping the replaced producer does not unlist its successor.
    drop(old);
    assert!(
        resolved(&mut consumer.subscribe_track("t"))
            .unwrap()
            .is_ok()
    );
}

#[test]
fn await_resolves_across_threads() {
    let broadcast = BroadcastProducer::on_demand();
    let consumer = broadcast.consume();
    let handle = std::thread::spawn(move || {
        pollster::block_on(async {
            let mut track = consumer.subscribe_track("t").await.unwrap();
            track.next_group().await.unwrap().unwrap().sequence()
        })
    });
    let request = pollster::block_on(broadcast.requested_track()).unwrap();
    let mut track = request.serve(Track::new("t"));
    // Whether the subscriber resolves before or after this group exists, it starts at
    // the latest group: this one.
    track.create_group(5).finish();
    assert_eq!(handle.join().unwrap(), 5);
}

#[test]
fn a_track_taken_after_its_last_consumer_left_is_not_retired_under_it() {
    let broadcast = BroadcastProducer::on_demand();
    let consumer = broadcast.consume();
    let mut pending = consumer.subscribe_track("t");
    let request = broadcast.poll_requested_track(&waiter());
    let Poll::Ready(Some(request)) = request else {
        panic!("the subscription asks for the track");
    };
    let track = request.serve(Track::new("t"));
    let first = match pending.poll_track(&waiter()) {
        Poll::Ready(Ok(first)) => first,
        other => panic!("the request was served: {other:?}"),
    };

    // The last consumer leaves: the producer sees the track unused...
    drop(first);
    assert!(track.poll_unused(&waiter()).is_ready());
    // ...and before it acts, a subscriber takes the still-listed track.
    let second = match consumer.subscribe_track("t").poll_track(&waiter()) {
        Poll::Ready(Ok(second)) => second,
        other => panic!("the listed track is handed out: {other:?}"),
    };
    assert!(!track.retire_if_unused(), "someone consumes it again");

    // Once that one leaves too, retiring succeeds, and the next subscriber makes a new
    // request instead of getting the retired track.
    drop(second);
    assert!(track.retire_if_unused());
    let mut third = consumer.subscribe_track("t");
    assert!(
        third.poll_track(&waiter()).is_pending(),
        "waits for a new answer"
    );
    assert!(matches!(
        broadcast.poll_requested_track(&waiter()),
        Poll::Ready(Some(_))
    ));
}
