//! Relays as one network, in virtual time: routes across a mesh, failover when a link
//! dies, and the announcements a mesh exchanges.
#![allow(missing_docs)]

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use common::relay::{Relay, SECOND, publisher, subscriber};
use common::seeded;
use moqx_net::model::{Origin, TrackProducer};
use moqx_net::runtime::test::{LinkConfig, TestRuntime};
use moqx_net::runtime::{Deadline, Runtime};

/// Waits `duration` of virtual time.
async fn sleep(runtime: &TestRuntime, duration: Duration) {
    let mut deadline = runtime.deadline();
    deadline.set(Some(runtime.now() + duration));
    moqx_kio::wait(|waiter| deadline.poll(waiter)).await
}

/// What a reading task saw of one track: each group's sequence in arrival order, and
/// whether the track ended.
#[derive(Clone, Default)]
struct Groups {
    sequences: Rc<RefCell<Vec<u64>>>,
    ended: Rc<RefCell<Option<Result<(), moqx_net::Error>>>>,
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

/// Spawns a task that records every group of `path`/`name` read from `origin` with
/// [`Origin::follow_track`]: across sessions, as an application that reconnects reads.
fn follow_groups(runtime: &TestRuntime, origin: &Origin, path: &str, name: &str) -> Groups {
    let groups = Groups::default();
    let out = groups.clone();
    let origin = origin.clone();
    let (path, name) = (path.to_owned(), name.to_owned());
    runtime.spawn_task(async move {
        let mut followed = origin.follow_track(path.as_str(), &name).await.unwrap();
        loop {
            match followed.next_group().await {
                Ok(Some(group)) => out.sequences.borrow_mut().push(group.sequence()),
                other => {
                    *out.ended.borrow_mut() = Some(other.map(|_| ()));
                    break;
                }
            }
        }
    });
    groups
}

/// Alice's chat, published by a client that keeps its own hop id (77) across its
/// sessions, as `moqx_tokio::Reconnect` does: its session configuration, its broadcast and
/// its track.
fn alice_with_hop_id() -> (
    moqx_net::session::SessionConfig,
    moqx_net::model::BroadcastProducer,
    TrackProducer,
) {
    let published = Origin::new();
    let broadcast = moqx_net::model::BroadcastProducer::new();
    let track = broadcast.create_track(moqx_net::model::Track::new("chat"));
    published.publish("alice", &broadcast).unwrap();
    let config = {
        let mut session_config = moqx_net::session::SessionConfig::default();
        session_config.publish = Some(published);
        session_config.origin_id = 77;
        session_config
    };
    (config, broadcast, track)
}

/// Writes group `n` (one frame, its number) on `track`.
fn send(track: &mut TrackProducer, n: u64) {
    let mut group = track.append_group();
    group.write(n, format!("{n}"));
    group.finish();
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

/// Every group of `0..sent` arrived, and the track is still going.
fn assert_every_group_arrived(groups: &Groups, sent: u64) {
    assert_eq!(
        missing(groups, sent),
        Vec::<u64>::new(),
        "nothing lost of {sent}"
    );
    assert!(
        groups.ended.borrow().is_none(),
        "{:?}",
        groups.ended.borrow()
    );
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
        b.link_over(runtime, &mut d, {
            let mut link_config = LinkConfig::default();
            link_config.drop_after = Some(Duration::from_millis(2500));
            link_config.silent_for = SECOND;
            link_config
        });
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
        a.link_over(runtime, &mut b, {
            let mut link_config = LinkConfig::default();
            link_config.drop_after = Some(SECOND);
            link_config
        });
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

/// Links relays `a` and `b` of `relays` (`b` dials `a`) over `link`.
fn link_pair(runtime: &TestRuntime, relays: &mut [Relay], a: usize, b: usize, link: LinkConfig) {
    let (low, high) = (a.min(b), a.max(b));
    let (left, right) = relays.split_at_mut(high);
    let (first, second) = (&mut left[low], &mut right[0]);
    if a < b {
        first.link_over(runtime, second, link);
    } else {
        second.link_over(runtime, first, link);
    }
}

/// Announcements sent so far by every session of every relay.
fn announcements(relays: &[Relay]) -> u64 {
    relays
        .iter()
        .flat_map(|relay| &relay.sessions)
        .map(|session| session.counters().announcements_sent)
        .sum()
}

/// Panics if a route at any relay passes through a relay twice, or through itself.
fn assert_loop_free(relays: &[Relay]) {
    for relay in relays {
        for (path, hops) in relay.origin.routes("") {
            let mut seen = std::collections::HashSet::new();
            assert!(
                hops.iter().all(|hop| seen.insert(*hop)),
                "relay {}: {path} by {hops:?} holds a relay twice",
                relay.id
            );
            assert!(
                !hops.contains(&relay.id),
                "relay {}: {path} by {hops:?} loops through itself",
                relay.id
            );
        }
    }
}

#[test]
fn sixteen_relays_in_a_random_mesh_with_failing_links_reach_every_broadcast_without_loops() {
    seeded(44, |runtime| {
        const RELAYS: usize = 16;
        const BROADCASTS: usize = 1000;
        let mut rng = fastrand::Rng::with_seed(runtime.seed());
        let mut relays: Vec<Relay> = (1..=RELAYS as u64).map(Relay::with_id).collect();
        // A ring that stays up (the mesh stays connected whatever fails), and 16 random
        // chords, each lost at a random time within the first 3 s.
        for i in 0..RELAYS {
            link_pair(
                runtime,
                &mut relays,
                (i + 1) % RELAYS,
                i,
                LinkConfig::default(),
            );
        }
        let mut chords = Vec::new();
        while chords.len() < RELAYS {
            let (a, b) = (rng.usize(..RELAYS), rng.usize(..RELAYS));
            let adjacent = a.abs_diff(b) <= 1 || a.abs_diff(b) == RELAYS - 1;
            if adjacent || chords.contains(&(a, b)) || chords.contains(&(b, a)) {
                continue;
            }
            let drop_after = Duration::from_millis(1000 + rng.u64(..2000));
            let link = {
                let mut link_config = LinkConfig::default();
                link_config.drop_after = Some(drop_after);
                link_config
            };
            link_pair(runtime, &mut relays, a, b, link);
            chords.push((a, b));
        }
        // 1,000 broadcasts, published by a client of a random relay each.
        let mut broadcasts = Vec::new();
        let mut publishers = Vec::new();
        for relay in relays.iter_mut() {
            let origin = Origin::new();
            publishers.push(relay.connect(
                runtime,
                moqx_net::session::SessionConfig::default().with_publisher(&origin),
            ));
            broadcasts.push(origin);
        }
        let mut producers = Vec::new();
        for n in 0..BROADCASTS {
            let broadcast = moqx_net::model::BroadcastProducer::new();
            broadcasts[rng.usize(..RELAYS)]
                .publish(format!("room/{n}"), &broadcast)
                .unwrap();
            producers.push(broadcast);
        }
        let everywhere = |relays: &[Relay]| {
            relays
                .iter()
                .all(|relay| relay.origin.broadcast_count() == BROADCASTS)
        };
        assert!(
            runtime.run_until(SECOND, || everywhere(&relays)),
            "every broadcast reaches every relay"
        );
        let converged = announcements(&relays);
        assert_loop_free(&relays);

        // The chords fail, one by one; then each heals (a new link).
        for _ in 0..12 {
            runtime.advance(Duration::from_millis(250));
            assert_loop_free(&relays);
            assert!(
                everywhere(&relays),
                "the ring keeps every broadcast reachable"
            );
        }
        let failed = announcements(&relays);
        for (a, b) in chords.clone() {
            link_pair(runtime, &mut relays, a, b, LinkConfig::default());
        }
        runtime.advance(5 * SECOND);
        assert_loop_free(&relays);
        assert!(everywhere(&relays));
        assert_eq!(
            runtime.pending_timers(),
            0,
            "the mesh settles: nothing in flight"
        );
        let healed = announcements(&relays);
        // The figures BENCHMARKS.md reports (`cargo test -p moqx-net --test cluster -- --nocapture`).
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "mesh of {RELAYS} relays, {} links, {BROADCASTS} broadcasts: {converged} \
             announcements to converge ({:.1} per broadcast per relay), {} per chord lost \
             ({} chords), {} per chord healed",
                RELAYS + chords.len(),
                converged as f64 / (BROADCASTS * RELAYS) as f64,
                (failed - converged) / chords.len() as u64,
                chords.len(),
                (healed - failed) / chords.len() as u64,
            );
        }
        drop(producers);
    });
}

/// A subscriber following a publisher that loses its session and comes back (the same
/// hop id, as `Reconnect` keeps it) carries on where it stopped, with nothing lost: what
/// the publisher wrote meanwhile comes from its own cache.
#[test]
fn a_follower_carries_on_when_its_publisher_comes_back_on_a_new_session() {
    seeded(45, |runtime| {
        let mut relay = Relay::with_id(1);
        let (publisher_config, _broadcast, mut track) = alice_with_hop_id();
        let first = relay.connect(runtime, publisher_config.clone());
        let (_viewer, seen) = subscriber(runtime, &mut relay);
        assert!(runtime.run_until(SECOND, || seen.consume_broadcast("alice").is_some()));

        let groups = follow_groups(runtime, &seen, "alice", "chat");
        assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));
        for n in 0..10 {
            send(&mut track, n);
            runtime.advance(Duration::from_millis(50));
        }
        // The session is lost; the publisher goes on writing, then comes back.
        first.close(moqx_net::Error::Cancel);
        for n in 10..20 {
            send(&mut track, n);
            runtime.advance(Duration::from_millis(50));
        }
        assert!(seen.consume_broadcast("alice").is_none(), "it was gone");
        let _second = relay.connect(runtime, publisher_config);
        runtime.advance(SECOND);
        for n in 20..30 {
            send(&mut track, n);
            runtime.advance(Duration::from_millis(50));
        }
        runtime.advance(SECOND);
        assert_eq!(missing(&groups, 30), Vec::<u64>::new(), "nothing lost");
        assert!(
            groups.ended.borrow().is_none(),
            "{:?}",
            groups.ended.borrow()
        );
    });
}

/// Relays A, B, C (B and C dial A, C dials B); a publisher on B, a subscriber on C
/// following its track; B dies (its links and its publisher's session are lost at once)
/// and the publisher comes back on C: the subscriber carries on, nothing lost (what the
/// publisher wrote meanwhile comes from its own cache).
#[test]
fn a_follower_carries_on_when_its_publishers_relay_dies_and_it_comes_back_elsewhere() {
    seeded(46, |runtime| {
        let mut a = Relay::with_id(1);
        let mut b = Relay::with_id(2);
        let mut c = Relay::with_id(3);
        let dies = {
            let mut link_config = LinkConfig::default();
            link_config.drop_after = Some(Duration::from_millis(1500));
            link_config
        };
        a.link_over(runtime, &mut b, dies.clone());
        a.link(runtime, &mut c);
        b.link_over(runtime, &mut c, dies.clone());
        let (publisher_config, _broadcast, mut track) = alice_with_hop_id();
        b.link = dies;
        let _first = b.connect(runtime, publisher_config.clone());
        let (_viewer, seen) = subscriber(runtime, &mut c);
        assert!(runtime.run_until(SECOND, || seen.consume_broadcast("alice").is_some()));
        let groups = follow_groups(runtime, &seen, "alice", "chat");
        assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));
        let mut n = 0;
        while runtime.elapsed() < Duration::from_millis(2000) {
            send(&mut track, n);
            n += 1;
            runtime.advance(Duration::from_millis(50));
        }
        // B is gone; the publisher comes back on C.
        let _second = c.connect(runtime, publisher_config);
        for _ in 0..20 {
            send(&mut track, n);
            n += 1;
            runtime.advance(Duration::from_millis(50));
        }
        runtime.advance(SECOND);
        assert_every_group_arrived(&groups, n);
    });
}

/// A relay that lingers keeps the broadcast of a publisher whose session was lost
/// announced, and the subscriptions it serves waiting; the publisher back within the
/// linger (a new session, its own hop id) is taken in place. A viewer on another relay,
/// with a plain subscription, reads on with nothing lost and its relay never hears the
/// broadcast end. Without lingering the same subscription ends.
#[test]
fn a_lingering_relay_keeps_a_lost_publishers_broadcast_for_its_return() {
    for linger in [true, false] {
        seeded(47, |runtime| {
            let mut a = Relay::with_id(1);
            let mut c = Relay::with_id(3);
            a.link(runtime, &mut c);
            let _lingering = linger.then(|| a.origin.linger());
            let (publisher_config, _broadcast, mut track) = alice_with_hop_id();
            a.link = {
                let mut link_config = LinkConfig::default();
                link_config.drop_after = Some(Duration::from_millis(1500));
                link_config
            };
            let _first = a.connect(runtime, publisher_config.clone());
            a.link = LinkConfig::default();
            let (_viewer, seen) = subscriber(runtime, &mut c);
            assert!(runtime.run_until(SECOND, || seen.consume_broadcast("alice").is_some()));
            let mut on_c = c.origin.announced("");
            let groups = read_groups(runtime, &seen, "alice", "chat");
            assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));
            // What C hears, read as it comes (unread changes of one path coalesce).
            let mut ended_on_c = false;
            let mut step = |track: &mut TrackProducer, n: &mut u64| {
                send(track, *n);
                *n += 1;
                runtime.advance(Duration::from_millis(50));
                ended_on_c |= std::iter::from_fn(|| on_c.try_next()).any(|announcement| {
                    matches!(announcement, moqx_net::model::Announcement::Ended { .. })
                });
            };
            let mut n = 0;
            while runtime.elapsed() < Duration::from_millis(2500) {
                step(&mut track, &mut n);
            }
            // The first session was lost at 1.5 s; the publisher comes back on A.
            let _second = a.connect(runtime, publisher_config);
            for _ in 0..20 {
                step(&mut track, &mut n);
            }
            runtime.advance(SECOND);
            if linger {
                assert_every_group_arrived(&groups, n);
                assert!(!ended_on_c, "C never heard the broadcast end");
            } else {
                assert!(
                    matches!(*groups.ended.borrow(), Some(Err(_))),
                    "without lingering the subscription ends: {:?}",
                    groups.ended.borrow()
                );
                assert!(ended_on_c);
            }
        });
    }
}

/// A link's price (`?cost=N` on the dialing relay) is declared in SETUP, and the peer
/// charges it too: both ends rank routes over the link at that cost.
#[test]
fn a_links_price_is_declared_in_setup_and_charged_at_both_ends() {
    seeded(47, |runtime| {
        let mut a = Relay::with_id(1);
        let mut b = Relay::with_config({
            let mut session_config = moqx_net::session::SessionConfig::default();
            session_config.link_cost = 5;
            session_config
        });
        b.id = 2;
        a.link(runtime, &mut b); // B dials A
        let (_on_a, _a_broadcast, _a_track) = publisher(runtime, &mut a, "on-a", "t");
        let (_on_b, _b_broadcast, _b_track) = publisher(runtime, &mut b, "on-b", "t");
        assert!(runtime.run_until(SECOND, || {
            a.origin.consume_broadcast("on-b").is_some()
                && b.origin.consume_broadcast("on-a").is_some()
        }));
        let cost =
            |relay: &Relay, path: &str| relay.origin.consume_broadcast(path).unwrap().route().cost;
        assert_eq!(cost(&b, "on-a"), 5, "B prices the link it dials");
        assert_eq!(cost(&a, "on-b"), 5, "A charges what B declared");
    });
}
