//! A relay network tested in virtual time with the public kit (`moqx_net::sim`, feature
//! `test-runtime`): copy this file to start testing your own application the same way.
//!
//! Three relays in a line, a publisher on the first and a subscriber on the last. The
//! last relay is cut off and comes back; the subscriber hears every message, in order,
//! and no real time passes: the test covers twenty seconds in milliseconds, the same way
//! on every run (a failure names its seed; `MOQ_TEST_SEED=<seed>` replays it).
//!
//! ```text
//! cargo test -p moq-examples --test sim_test
//! ```

use moqx_net::sim::{SECOND, seeded, send};

#[test]
fn a_subscriber_cut_off_by_a_partition_catches_up_once_it_heals() {
    // The one clock read: where virtual time starts.
    seeded(7, std::time::Instant::now(), |sim| {
        let mut sim = sim.relay("a").relay("b").relay("c");
        sim = sim.link("a", "b").link("b", "c");
        sim = sim.client("alice", "a").client("bob", "c");
        let mut chat = sim.publish("alice", "room/alice", "chat");
        let heard = sim.subscribe("bob", "room/alice", "chat");
        assert!(sim.run_until(SECOND, || chat.consumer_count() > 0));
        send(&mut chat, 0, "before");
        assert!(sim.run_until(SECOND, || heard.len() == 1));

        // `c` is cut off from `b`: bob hears nothing while alice goes on talking.
        sim.partition("b", "c");
        send(&mut chat, 1, "during");
        sim.run_for(10 * SECOND);
        assert_eq!(heard.texts(), ["before"]);

        // Healed: `c` finds alice's broadcast again, and bob's track carries on from the
        // message he missed, which the relays kept.
        sim.heal("b", "c");
        send(&mut chat, 2, "after");
        assert!(sim.run_until(10 * SECOND, || heard.len() == 3));
        assert_eq!(heard.texts(), ["before", "during", "after"]);
    });
}
