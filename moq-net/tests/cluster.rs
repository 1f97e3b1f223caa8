//! Relays as one network, in virtual time: routes across a mesh, failover when a link
//! dies, and the announcements a mesh exchanges.
#![allow(missing_docs)]

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use common::relay::{Relay, SECOND, publisher, subscriber};
use common::seeded;
use moq_net::model::{Origin, TrackProducer};
use moq_net::runtime::test::{LinkConfig, TestRuntime};
use moq_net::runtime::{Deadline, Runtime};

/// Waits `duration` of virtual time.
async fn sleep(runtime: &TestRuntime, duration: Duration) {
    let mut deadline = runtime.deadline();
    deadline.set(Some(runtime.now() + duration));
    kio::wait(|waiter| deadline.poll(waiter)).await
}

/// What a reading task saw of one track: each group's sequence in arrival order, and
/// whether the track ended.
#[derive(Clone, Default)]
struct Groups {
    sequences: Rc<RefCell<Vec<u64>>>,
    ended: Rc<RefCell<Option<Result<(), moq_net::Error>>>>,
}

/// Spawns a task that records every group of `path`/`name` read from `origin`.
fn read_groups(runtime: &TestRuntime, origin: &Origin, path: &str, name: &str) -> Groups {
    let groups = Groups::default();
    let out = groups.clone();
    let broadcast = origin.consume_broadcast(path).expect("announced");
    let name = name.to_owned();
    runtime.spawn_task(async move {
        let outcome = match broadcast.subscribe_track(&name).await {
            Err(error) => Err(error),
            Ok(mut track) => loop {
                match track.next_group().await {
                    Ok(Some(group)) => out.sequences.borrow_mut().push(group.sequence()),
                    Ok(None) => break Ok(()),
                    Err(error) => break Err(error),
                }
            },
        };
        *out.ended.borrow_mut() = Some(outcome);
    });
    groups
}

/// Publishes one group (of one frame) every `interval` for `count` groups.
fn publish_every(
    runtime: &TestRuntime,
    mut track: TrackProducer,
    interval: Duration,
    count: u64,
) -> Rc<RefCell<u64>> {
    let sent = Rc::new(RefCell::new(0));
    let counter = sent.clone();
    let clock = runtime.clone();
    runtime.spawn_task(async move {
        for n in 0..count {
            let mut group = track.append_group();
            group.write(n, format!("{n}"));
            group.finish();
            *counter.borrow_mut() += 1;
            sleep(&clock, interval).await;
        }
        // Kept open: the track stays live for the rest of the test.
        std::future::pending::<()>().await;
        drop(track);
    });
    sent
}

/// The groups in `0..sent` that never arrived.
fn missing(groups: &Groups, sent: u64) -> Vec<u64> {
    let seen = groups.sequences.borrow();
    (0..sent).filter(|n| !seen.contains(n)).collect()
}

#[test]
fn a_subscription_moves_to_the_other_route_when_its_link_dies_losing_at_most_one_group() {
    seeded(41, |runtime| {
        // A publishes. D reaches A by B (two hops) and by C and E (three): it serves from
        // B, and keeps the route by E as a standby. The link D-B goes silent at 1.5 s (B
        // died) and is declared lost at 2.5 s (the idle timeout): 30 groups are published
        // meanwhile, which D must fetch by the standby from where it stopped.
        let mut a = Relay::with_id(1);
        let mut b = Relay::with_id(2);
        let mut c = Relay::with_id(3);
        let mut d = Relay::with_id(4);
        let mut e = Relay::with_id(5);
        a.link(runtime, &mut b);
        a.link(runtime, &mut c);
        c.link(runtime, &mut e);
        b.link_over(
            runtime,
            &mut d,
            LinkConfig {
                drop_after: Some(Duration::from_millis(2500)),
                silent_for: SECOND,
                ..LinkConfig::default()
            },
        );
        e.link(runtime, &mut d);
        let (_publisher, _broadcast, track) = publisher(runtime, &mut a, "live", "video");
        let (_viewer, seen) = subscriber(runtime, &mut d);
        assert!(runtime.run_until(SECOND, || {
            d.origin
                .consume_broadcast("live")
                .is_some_and(|live| live.hops() == [1, 2])
                && seen.consume_broadcast("live").is_some()
        }));
        // D knows the standby: the best route not through B.
        assert_eq!(
            d.origin
                .consume_broadcast_excluding("live", 2)
                .map(|standby| standby.hops()),
            Some(vec![1, 3, 5])
        );

        let groups = read_groups(runtime, &seen, "live", "video");
        assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));
        // 30 groups per second for 3 s.
        let sent = publish_every(runtime, track, Duration::from_millis(33), 90);
        runtime.advance(4 * SECOND);

        assert_eq!(*sent.borrow(), 90);
        assert_eq!(
            d.origin.consume_broadcast("live").map(|live| live.hops()),
            Some(vec![1, 3, 5]),
            "D serves from the standby now"
        );
        let lost = missing(&groups, 90);
        assert!(
            lost.len() <= 1,
            "at most the group in flight on the dead link is lost, none of those published \
             while it was silent: {lost:?}"
        );
        assert!(
            groups.ended.borrow().is_none(),
            "the viewer's subscription goes on: {:?}",
            groups.ended.borrow()
        );
        assert!(
            seen.consume_broadcast("live").is_some(),
            "the viewer never saw the broadcast end"
        );
    });
}

#[test]
fn a_broadcast_whose_last_route_dies_ends_for_the_viewers() {
    seeded(42, |runtime| {
        let mut a = Relay::with_id(1);
        let mut b = Relay::with_id(2);
        a.link_over(
            runtime,
            &mut b,
            LinkConfig {
                drop_after: Some(SECOND),
                ..LinkConfig::default()
            },
        );
        let (_publisher, _broadcast, track) = publisher(runtime, &mut a, "live", "video");
        let (_viewer, seen) = subscriber(runtime, &mut b);
        assert!(runtime.run_until(SECOND, || seen.consume_broadcast("live").is_some()));
        let groups = read_groups(runtime, &seen, "live", "video");
        let _sent = publish_every(runtime, track, Duration::from_millis(100), 30);
        runtime.advance(2 * SECOND);
        assert!(b.origin.consume_broadcast("live").is_none());
        assert!(seen.consume_broadcast("live").is_none(), "announced ended");
        assert!(
            matches!(*groups.ended.borrow(), Some(Err(_))),
            "the subscription failed: {:?}",
            groups.ended.borrow()
        );
    });
}

#[test]
fn a_peer_going_away_prices_its_routes_out_and_subscriptions_move_with_no_group_lost() {
    seeded(43, |runtime| {
        // The same mesh: D serves from B, with E as a standby. B sends GOAWAY to D (B is
        // draining) while 30 groups a second flow.
        let mut a = Relay::with_id(1);
        let mut b = Relay::with_id(2);
        let mut c = Relay::with_id(3);
        let mut d = Relay::with_id(4);
        let mut e = Relay::with_id(5);
        a.link(runtime, &mut b);
        a.link(runtime, &mut c);
        c.link(runtime, &mut e);
        b.link(runtime, &mut d);
        let (b_to_d, d_to_b) = (
            b.sessions.last().unwrap().clone(),
            d.sessions.last().unwrap().clone(),
        );
        e.link(runtime, &mut d);
        let (_publisher, _broadcast, track) = publisher(runtime, &mut a, "live", "video");
        let (_viewer, seen) = subscriber(runtime, &mut d);
        assert!(runtime.run_until(SECOND, || {
            d.origin
                .consume_broadcast("live")
                .is_some_and(|live| live.hops() == [1, 2])
                && seen.consume_broadcast("live").is_some()
        }));
        let groups = read_groups(runtime, &seen, "live", "video");
        assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));
        let sent = publish_every(runtime, track, Duration::from_millis(33), 90);
        runtime.advance(SECOND + Duration::from_millis(510));

        assert_eq!(d_to_b.peer_goaway(), None);
        b_to_d.goaway("");
        runtime.advance(SECOND);
        assert_eq!(
            d_to_b.peer_goaway().as_deref(),
            Some(""),
            "D heard the GOAWAY"
        );
        assert_eq!(
            d.origin.consume_broadcast("live").map(|live| live.hops()),
            Some(vec![1, 3, 5]),
            "B's route is priced out: D serves from the other one"
        );
        assert!(
            d.origin
                .consume_broadcast_excluding("live", 5)
                .is_some_and(|via_b| via_b.route().cost == u64::MAX),
            "B's route is still there, as the costliest"
        );
        runtime.advance(2 * SECOND);
        assert_eq!(*sent.borrow(), 90);
        assert_eq!(missing(&groups, 90), Vec::<u64>::new(), "no group lost");
        assert!(groups.ended.borrow().is_none());
        assert!(!d_to_b.is_closed(), "the link stays until B closes it");
    });
}
