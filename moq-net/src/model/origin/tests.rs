//! Unit tests of `origin.rs`.
use super::*;
use std::task::Waker;

/// The queued announcements as `+path` / `-path`.
fn drain(announced: &mut Announced) -> Vec<String> {
    std::iter::from_fn(|| announced.try_next())
        .map(|announcement| match announcement {
            Announcement::Active { path, .. } => format!("+{path}"),
            Announcement::Ended { path } => format!("-{path}"),
        })
        .collect()
}

#[test]
fn a_listener_gets_a_snapshot_then_live_changes_under_its_prefix_only() {
    let origin = Origin::new();
    let a = BroadcastProducer::new();
    let other = BroadcastProducer::new();
    let lookalike = BroadcastProducer::new();
    origin.publish("/room//a/", &a).unwrap();
    origin.publish("lobby/x", &other).unwrap();
    origin.publish("roomba", &lookalike).unwrap();

    let mut room = origin.announced("room/");
    assert_eq!(room.prefix().as_str(), "room");
    assert_eq!(room.initial_len(), 1);
    assert_eq!(drain(&mut room), ["+room/a"]);

    let b = BroadcastProducer::new();
    origin.publish("room/b", &b).unwrap();
    origin
        .publish("roomba/c", &BroadcastProducer::new())
        .unwrap(); // dropped at once
    drop(a);
    assert_eq!(drain(&mut room), ["+room/b", "-room/a"]);

    let mut everything = origin.announced("");
    assert_eq!(
        drain(&mut everything),
        ["+lobby/x", "+room/b", "+roomba"],
        "the root covers every path, in byte order"
    );
    assert_eq!(origin.paths("room"), [Path::new("room/b")]);
}

#[test]
fn a_newer_publisher_replaces_and_an_older_one_takes_over_again() {
    let origin = Origin::new();
    let mut listener = origin.announced("");
    let first = BroadcastProducer::new();
    let second = BroadcastProducer::new();
    origin.publish("p", &first).unwrap();
    origin.publish("p", &first).unwrap(); // the same broadcast again: nothing
    assert_eq!(drain(&mut listener), ["+p"]);
    origin.publish("p", &second).unwrap();
    let active = origin.consume_broadcast("p").unwrap();
    assert!(active.same_broadcast(&second.consume()));
    assert_eq!(drain(&mut listener), ["+p"], "a restart");

    drop(second);
    let active = origin.consume_broadcast("p").unwrap();
    assert!(
        active.same_broadcast(&first.consume()),
        "fell back to the older one"
    );
    assert_eq!(drain(&mut listener), ["+p"], "a restart again");
    drop(first);
    assert!(origin.consume_broadcast("p").is_none());
    assert_eq!(drain(&mut listener), ["-p"]);
}

#[test]
fn the_shortest_route_is_active_and_a_longer_one_changes_nothing() {
    let origin = Origin::new();
    let direct = BroadcastProducer::new();
    direct.set_hops(vec![1]);
    let around = BroadcastProducer::new();
    around.set_hops(vec![1, 2, 3]);
    let mut listener = origin.announced("");
    origin.publish("p", &direct).unwrap();
    origin.publish("p", &around).unwrap();
    assert_eq!(
        drain(&mut listener),
        ["+p"],
        "the longer route is not announced"
    );
    let active = origin.consume_broadcast("p").unwrap();
    assert!(active.same_broadcast(&direct.consume()));
    drop(direct);
    assert_eq!(
        drain(&mut listener),
        ["+p"],
        "the remaining route takes over"
    );
    assert!(
        origin
            .consume_broadcast("p")
            .unwrap()
            .same_broadcast(&around.consume())
    );
}

#[test]
fn dropping_an_inactive_publisher_announces_nothing() {
    let origin = Origin::new();
    let older = BroadcastProducer::new();
    let newer = BroadcastProducer::new();
    origin.publish("p", &older).unwrap();
    origin.publish("p", &newer).unwrap();
    let mut listener = origin.announced("");
    drop(older);
    assert_eq!(drain(&mut listener), ["+p"], "only the snapshot");
    assert!(origin.consume_broadcast("p").is_some());
}

#[test]
fn queued_announcements_do_not_count_as_consumers() {
    let origin = Origin::new();
    let mut listener = origin.announced("");
    let broadcast = BroadcastProducer::new();
    origin.publish("p", &broadcast).unwrap();
    let waiter = Waiter::new(Waker::noop());
    assert!(broadcast.poll_unused(&waiter).is_ready());
    let Some(Announcement::Active {
        broadcast: consumer,
        ..
    }) = listener.try_next()
    else {
        panic!("expected an announcement");
    };
    assert_eq!(broadcast.consumer_count(), 1);
    drop(consumer);
    assert!(broadcast.poll_unused(&waiter).is_ready());
}

#[test]
fn a_dropped_listener_is_forgotten() {
    let origin = Origin::new();
    let listener = origin.announced("");
    assert_eq!(origin.shared.state.lock().listeners.len(), 1);
    drop(listener);
    assert!(origin.shared.state.lock().listeners.is_empty());
    origin.publish("p", &BroadcastProducer::new()).unwrap();
}

#[test]
fn a_scoped_view_sees_announces_and_publishes_only_inside_its_scope() {
    let origin = Origin::new();
    let mut everything = origin.announced("");
    let room = origin.scope("room", ["alice", "bob"]);
    let mut seen = room.announced("");
    let mut only_bob = room.announced("bob");
    let mut outside = room.announced("carol");

    let alice = BroadcastProducer::new();
    let carol = BroadcastProducer::new();
    let lobby = BroadcastProducer::new();
    room.publish("alice/cam", &alice).unwrap();
    assert_eq!(room.publish("carol", &carol), Err(Error::Unauthorized));
    origin.publish("room/carol", &carol).unwrap();
    origin.publish("lobby/x", &lobby).unwrap();
    let bob = BroadcastProducer::new();
    origin.publish("room/bob", &bob).unwrap();

    assert_eq!(
        drain(&mut everything),
        ["+room/alice/cam", "+room/carol", "+lobby/x", "+room/bob"]
    );
    assert_eq!(
        drain(&mut seen),
        ["+alice/cam", "+bob"],
        "relative, filtered"
    );
    assert_eq!(drain(&mut only_bob), ["+bob"]);
    assert!(drain(&mut outside).is_empty());
    assert_eq!(room.paths(""), [Path::new("alice/cam"), Path::new("bob")]);
    assert_eq!(room.broadcast_count(), 2);
    assert_eq!(origin.broadcast_count(), 4);
    assert!(room.consume_broadcast("carol").is_none());
    assert!(room.consume_broadcast("bob").is_some());

    // A late listener's snapshot is filtered the same way.
    let mut late = room.announced("");
    assert_eq!(late.initial_len(), 2);
    drop(bob);
    assert_eq!(
        drain(&mut late),
        ["+alice/cam"],
        "bob came and went before the late listener looked: not mentioned"
    );
    drop(carol);
    assert_eq!(drain(&mut seen), ["-bob"], "carol's end is not seen either");
}

#[test]
fn a_parked_listener_is_woken_from_another_thread() {
    let origin = Origin::new();
    let mut listener = origin.announced("chat");
    let handle = std::thread::spawn(move || {
        pollster::block_on(async {
            let mut paths = Vec::new();
            for _ in 0..2 {
                paths.push(listener.next().await.path().to_string());
            }
            paths
        })
    });
    let users: Vec<BroadcastProducer> = ["a", "b"]
        .iter()
        .map(|user| {
            let broadcast = BroadcastProducer::new();
            origin.publish(format!("chat/{user}"), &broadcast).unwrap();
            broadcast
        })
        .collect();
    assert_eq!(handle.join().unwrap(), ["chat/a", "chat/b"]);
    drop(users);
}

#[test]
fn a_lost_publication_lingers_announced_until_its_linger_ends_or_a_publisher_comes_back() {
    let origin = Origin::new();
    let lingering = origin.linger();
    let waiter = moqx_kio::Waiter::new(Waker::noop());
    let mut room = origin.announced("room");

    // Dropped, not lost: withdrawn at once, as without lingering.
    let left = BroadcastProducer::new();
    origin.publish("room/left", &left).unwrap();
    assert_eq!(drain(&mut room), ["+room/left"]);
    drop(left);
    assert_eq!(drain(&mut room), ["-room/left"]);
    assert!(lingering.poll_next(&waiter).is_pending());

    // Lost: the path stays announced, its followers' changes stay open, nothing serves it.
    let alice = BroadcastProducer::new();
    origin.publish("room/alice", &alice).unwrap();
    let changes = origin.route_changes("room/alice").unwrap();
    assert_eq!(drain(&mut room), ["+room/alice"]);
    alice.drop_as_lost();
    assert_eq!(
        drain(&mut room),
        Vec::<String>::new(),
        "no end while it lingers"
    );
    assert!(origin.consume_broadcast("room/alice").is_none());
    assert_eq!(origin.broadcast_count(), 0);
    assert!(origin.paths("").is_empty());
    let Poll::Ready(first) = lingering.poll_next(&waiter) else {
        panic!("the path lingers");
    };
    assert_eq!(first.path().as_str(), "room/alice");
    assert!(changes.poll_changed(&waiter, changes.count()).is_pending());

    // The publisher comes back within the linger: taken in place, no end in between.
    let back = BroadcastProducer::new();
    origin.publish("room/alice", &back).unwrap();
    assert_eq!(drain(&mut room), ["+room/alice"]);
    lingering.end(&first);
    assert!(
        origin.consume_broadcast("room/alice").is_some(),
        "a stale end does nothing"
    );

    // Lost again, and its linger ends this time: the listener hears the end (it was
    // told the path active), and the followers see the path closed.
    back.drop_as_lost();
    let Poll::Ready(second) = lingering.poll_next(&waiter) else {
        panic!("the path lingers again");
    };
    assert_ne!(first, second);
    assert_eq!(drain(&mut room), Vec::<String>::new());
    lingering.end(&second);
    assert_eq!(drain(&mut room), ["-room/alice"]);
    assert!(matches!(
        changes.poll_changed(&waiter, changes.count()),
        Poll::Ready(Err(_))
    ));
    assert!(origin.route_changes("room/alice").is_none());
}

#[test]
fn dropping_the_linger_handle_ends_every_lingering_path_and_turns_lingering_off() {
    let origin = Origin::new();
    let lingering = origin.linger();
    let mut everything = origin.announced("");
    let a = BroadcastProducer::new();
    origin.publish("a", &a).unwrap();
    a.drop_as_lost();
    assert_eq!(drain(&mut everything), ["+a"]);
    drop(lingering);
    assert_eq!(drain(&mut everything), ["-a"]);

    let b = BroadcastProducer::new();
    origin.publish("b", &b).unwrap();
    assert_eq!(drain(&mut everything), ["+b"]);
    b.drop_as_lost();
    assert_eq!(
        drain(&mut everything),
        ["-b"],
        "no lingering without a handle"
    );
    assert_eq!(origin.broadcast_count(), 0);
}
