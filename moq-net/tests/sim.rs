//! The public simulation kit (`moqx_net::sim`) itself: partitions and heals between a
//! client and its relay, a user's own task on the virtual clock, and a lossy run that
//! replays exactly from its seed.

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use moqx_net::runtime::test::LinkConfig;
use moqx_net::sim::{SECOND, Sim, send};

#[test]
fn a_publisher_cut_off_from_its_relay_is_heard_again_once_it_reconnects() {
    let mut sim = Sim::new(3, common::epoch())
        .relay("hub")
        .client("alice", "hub")
        .client("bob", "hub");
    let mut chat = sim.publish("alice", "alice", "chat");
    let heard = sim.subscribe("bob", "alice", "chat");
    assert!(sim.run_until(SECOND, || chat.consumer_count() > 0));
    send(&mut chat, 0, "one");
    assert!(sim.run_until(SECOND, || heard.len() == 1));

    sim.partition("alice", "hub");
    assert!(
        sim.run_until(SECOND, || sim
            .subscriber_origin("bob")
            .consume_broadcast("alice")
            .is_none()),
        "the relay withdraws the broadcast of a client it lost"
    );
    send(&mut chat, 1, "two");
    sim.run_for(5 * SECOND);
    assert_eq!(heard.texts(), ["one"]);

    sim.heal("hub", "alice");
    assert!(sim.run_until(5 * SECOND, || heard.len() == 2));
    assert_eq!(heard.texts(), ["one", "two"]);
}

#[test]
fn a_task_of_the_test_sleeps_on_the_virtual_clock() {
    let mut sim = Sim::new(4, common::epoch())
        .relay("hub")
        .client("alice", "hub")
        .client("bob", "hub");
    // The track stays with the test: a producer dropped unfinished aborts its track.
    let chat = Rc::new(RefCell::new(sim.publish("alice", "alice", "chat")));
    let heard = sim.subscribe("bob", "alice", "chat");
    let (sleep, writer) = (sim.sleep(Duration::from_secs(30)), chat.clone());
    sim.spawn(async move {
        sleep.await;
        send(&mut writer.borrow_mut(), 0, "half a minute later");
    });
    assert!(sim.run_until(60 * SECOND, || heard.len() == 1));
    let elapsed = sim.elapsed();
    assert!(
        elapsed >= Duration::from_secs(30) && elapsed < Duration::from_secs(31),
        "{elapsed:?}"
    );
}

/// What a lossy run delivers, and when it is done, for `seed`.
fn lossy_run(seed: u64) -> (Vec<String>, Duration) {
    let lossy = {
        let mut link_config = LinkConfig::default();
        link_config.latency = Duration::from_millis(40);
        link_config.reorder = Duration::from_millis(30);
        link_config.reset_probability = 0.2;
        link_config
    };
    let mut sim = Sim::new(seed, common::epoch())
        .with_link(lossy)
        .relay("a")
        .relay("b")
        .link("a", "b")
        .client("alice", "a")
        .client("bob", "b");
    let mut chat = sim.publish("alice", "alice", "chat");
    let heard = sim.subscribe("bob", "alice", "chat");
    assert!(sim.run_until(5 * SECOND, || chat.consumer_count() > 0));
    for i in 0..50u64 {
        send(&mut chat, i, format!("message {i} {}", "x".repeat(200)));
        sim.run_for(Duration::from_millis(20));
    }
    sim.run_for(5 * SECOND);
    (heard.texts(), sim.elapsed())
}

#[test]
fn the_same_seed_replays_the_same_run() {
    let (first, _) = lossy_run(11);
    assert!(!first.is_empty(), "some messages arrive through the faults");
    assert_eq!(lossy_run(11), lossy_run(11));
}
