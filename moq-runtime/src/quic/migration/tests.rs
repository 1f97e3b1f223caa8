//! `Migrations` alone: which paths are probed, redirected, revived and challenged.

use std::time::{Duration, Instant};

use super::*;

fn address(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn info(from: SocketAddr, to: SocketAddr) -> quiche::SendInfo {
    quiche::SendInfo {
        from,
        to,
        at: Instant::now(),
    }
}

/// Where a packet quiche addressed from `local` to `to` goes.
fn sent_to(migrations: &Migrations, local: SocketAddr, to: SocketAddr) -> SocketAddr {
    let mut packet = info(local, to);
    migrations.redirect(&mut packet);
    packet.to
}

#[test]
fn packets_for_a_path_left_go_to_the_peers_new_address() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    assert_eq!(
        sent_to(&migrations, local, address(1)),
        address(1),
        "nothing moved yet"
    );

    assert_eq!(
        migrations.on_peer_migrated(local, address(2), false),
        vec![(local, address(1))]
    );
    assert_eq!(sent_to(&migrations, local, address(1)), address(2));
    assert_eq!(sent_to(&migrations, local, address(2)), address(2));
    assert_eq!(
        sent_to(&migrations, local, address(9)),
        address(9),
        "only paths left are redirected"
    );
    assert_eq!(migrations.probed(), 1);
}

#[test]
fn a_peer_back_on_a_path_it_left_is_sent_to_there_again() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    migrations.on_peer_migrated(local, address(2), false);
    assert_eq!(
        migrations.on_peer_migrated(local, address(1), false),
        vec![(local, address(2))]
    );
    assert_eq!(sent_to(&migrations, local, address(1)), address(1));
    assert_eq!(sent_to(&migrations, local, address(2)), address(1));
}

#[test]
fn the_paths_left_are_bounded_and_a_repeated_event_probes_nothing() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    for port in 2..100 {
        migrations.on_peer_migrated(local, address(port), false);
    }
    assert_eq!(migrations.left.len(), MOST_PATHS_LEFT);
    assert!(
        migrations
            .left
            .iter()
            .all(|left| left.path.1.port() >= 99 - MOST_PATHS_LEFT as u16),
        "the most recent are kept"
    );
    assert!(
        migrations
            .on_peer_migrated(local, address(99), false)
            .is_empty()
    );
    assert_eq!(migrations.probed(), 98);
}

#[test]
fn a_path_left_whose_probe_was_lost_is_probed_again_a_bounded_number_of_times() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    migrations.on_peer_migrated(local, address(2), false);
    let start = Instant::now();
    assert!(
        migrations
            .take_paths_to_probe_again(start, |_| true)
            .is_empty(),
        "nothing again at the first timer after the probe"
    );
    let mut at = start;
    let mut again = 0;
    while migrations.may_probe_again() {
        at += PROBE_AGAIN_AFTER * (1 << again);
        assert_eq!(
            migrations.take_paths_to_probe_again(at, |path| path == (local, address(1))),
            vec![(local, address(1))]
        );
        again += 1;
    }
    assert_eq!(again, usize::from(MOST_PROBES) - 1);
    assert!(
        migrations
            .take_paths_to_probe_again(at + Duration::from_secs(60), |_| true)
            .is_empty()
    );
    assert_eq!(migrations.probed(), u64::from(MOST_PROBES));
}

/// Regression: every path left counted as failed while its probe was still in flight
/// (quiche's "not validated" covers both), and was probed again at each of the
/// connection's timers, milliseconds apart; within 40 ms quiche had failed every path
/// left and, with nothing to fall back to, closed the connection without a word (two
/// chat members of the 2-hour soak).
#[test]
fn a_path_left_is_probed_again_only_once_failed_and_never_sooner_than_the_backoff() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    migrations.on_peer_migrated(local, address(2), false);
    let start = Instant::now();
    migrations.take_paths_to_probe_again(start, |_| true);
    // Timers a millisecond apart, quiche marking the path failed at each.
    let mut probed = Vec::new();
    for ms in 1..=3_100u64 {
        let now = start + Duration::from_millis(ms);
        if !migrations
            .take_paths_to_probe_again(now, |_| true)
            .is_empty()
        {
            probed.push(ms);
        }
    }
    assert_eq!(probed, [100, 300, 700, 1_500, 3_100]);

    // Under validation (its probe in flight), a path is not probed again however late.
    let mut migrations = Migrations::new(Some((local, address(1))));
    migrations.on_peer_migrated(local, address(2), false);
    migrations.take_paths_to_probe_again(start, |_| false);
    let late = start + Duration::from_secs(10);
    assert!(
        migrations
            .take_paths_to_probe_again(late, |_| false)
            .is_empty()
    );
    assert_eq!(migrations.probed(), 1);
}

#[test]
fn a_new_path_under_validation_asks_again_at_most_every_interval() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    let start = Instant::now();
    assert!(
        !migrations.revalidate(address(2), local, || start),
        "no new path yet"
    );
    migrations.on_new_path(local, address(2));
    assert!(
        !migrations.revalidate(address(2), local, || start),
        "quiche challenges the first packet itself"
    );
    assert!(!migrations.revalidate(address(2), local, || start + REVALIDATE_EVERY / 2));
    assert!(!migrations.revalidate(address(3), local, || start + REVALIDATE_EVERY * 2));
    assert!(migrations.revalidate(address(2), local, || start + REVALIDATE_EVERY));
    let mut at = start + REVALIDATE_EVERY;
    for _ in 1..MOST_REVALIDATIONS {
        at += REVALIDATE_EVERY;
        assert!(migrations.revalidate(address(2), local, || at));
    }
    assert!(
        !migrations.revalidate(address(2), local, || at + REVALIDATE_EVERY),
        "bounded"
    );
    assert_eq!(migrations.revalidations(), u64::from(MOST_REVALIDATIONS));
}

#[test]
fn a_validated_path_asks_for_nothing() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    let start = Instant::now();
    migrations.on_new_path(local, address(2));
    migrations.revalidate(address(2), local, || start);
    migrations.on_validated(local, address(2));
    assert!(!migrations.revalidate(address(2), local, || start + REVALIDATE_EVERY * 2));
}

#[test]
fn a_path_given_up_on_is_revived_by_its_next_packet_once() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    migrations.on_new_path(local, address(2));
    assert!(
        migrations.on_validation_failed(local, address(2)),
        "newly failed"
    );
    assert!(
        !migrations.on_validation_failed(local, address(2)),
        "told once"
    );
    assert!(!migrations.revive(address(3), local), "another path");
    assert!(migrations.revive(address(2), local));
    assert!(!migrations.revive(address(2), local), "once per failure");
    assert_eq!(migrations.revived(), 1);
    let start = Instant::now();
    migrations.revalidate(address(2), local, || start);
    assert!(
        migrations.revalidate(address(2), local, || start + REVALIDATE_EVERY),
        "under validation again"
    );
}

#[test]
fn a_validated_path_given_up_on_is_no_path_left_and_is_revived() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    migrations.on_peer_migrated(local, address(2), false);
    // quiche fails the active path and falls back to the one the peer left.
    migrations.on_validation_failed(local, address(2));
    assert!(
        migrations
            .on_peer_migrated(local, address(1), true)
            .is_empty(),
        "not a move of the peer's: nothing to probe"
    );
    assert_eq!(
        sent_to(&migrations, local, address(2)),
        address(2),
        "the peer is there: not redirected"
    );
    assert_eq!(
        sent_to(&migrations, local, address(1)),
        address(2),
        "what quiche sends on the path it fell back to goes where the peer was last seen"
    );
    assert_eq!(migrations.fallbacks(), 1);
    assert_eq!(
        migrations.last_seen(),
        Some((local, address(2))),
        "challenged again at once"
    );
    assert!(migrations.on_packet(address(2), local).is_empty());
    assert!(migrations.revive(address(2), local));
    // Validated again: a move, from the path quiche fell back to.
    assert_eq!(
        migrations.on_peer_migrated(local, address(2), false),
        vec![(local, address(1))]
    );
    assert_eq!(migrations.last_seen(), None);
}

#[test]
fn a_path_given_up_on_that_the_peer_left_is_a_path_left() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    migrations.on_peer_migrated(local, address(2), false);
    // The peer leaves 2 for 3; quiche fails 2 and falls back to 1.
    migrations.on_validation_failed(local, address(2));
    assert!(
        migrations
            .on_peer_migrated(local, address(1), true)
            .is_empty()
    );
    assert!(
        migrations
            .take_paths_to_probe_again(Instant::now() + Duration::from_secs(60), |_| true)
            .is_empty(),
        "no probe while the peer's address is unknown"
    );
    // The peer shows up at 3: both 1 and 2 are paths left, probed and redirected.
    assert_eq!(
        migrations.on_peer_migrated(local, address(3), false),
        vec![(local, address(1)), (local, address(2))]
    );
    assert_eq!(sent_to(&migrations, local, address(2)), address(3));
    assert_eq!(sent_to(&migrations, local, address(1)), address(3));
    assert!(!migrations.revive(address(2), local), "a path left");
    assert_eq!(migrations.probed(), 3);
}

#[test]
fn probes_spent_while_quiche_had_fallen_back_start_afresh() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    migrations.on_peer_migrated(local, address(2), false);
    migrations.on_peer_migrated(local, address(3), false);
    // Every probe of 1 and 2 lost: they went to 3, which the peer then left too.
    let mut now = Instant::now();
    while migrations.may_probe_again() {
        migrations.take_paths_to_probe_again(now, |_| true);
        now += Duration::from_secs(10);
    }
    // quiche gives 3 up and falls back to 2; the peer shows up at 4.
    migrations.on_validation_failed(local, address(3));
    assert!(
        migrations
            .on_peer_migrated(local, address(2), true)
            .is_empty()
    );
    let probed = migrations.on_peer_migrated(local, address(4), false);
    for port in [1, 2, 3] {
        assert!(
            probed.contains(&(local, address(port))),
            "{port}: {probed:?}"
        );
        assert_eq!(sent_to(&migrations, local, address(port)), address(4));
    }
    assert!(migrations.may_probe_again(), "the count starts afresh");
}

#[test]
fn a_packet_from_the_path_fallen_back_to_shows_the_peer_is_there() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    assert!(
        migrations.on_packet(address(1), local).is_empty(),
        "not fallen back: nothing to do"
    );
    migrations.on_peer_migrated(local, address(2), false);
    migrations.on_validation_failed(local, address(2));
    migrations.on_peer_migrated(local, address(1), true);
    assert!(migrations.on_packet(address(3), local).is_empty());
    assert_eq!(
        migrations.on_packet(address(1), local),
        vec![(local, address(2))],
        "the path quiche gave up on is a path left"
    );
    assert_eq!(sent_to(&migrations, local, address(1)), address(1));
    assert_eq!(sent_to(&migrations, local, address(2)), address(1));
    assert!(migrations.on_packet(address(1), local).is_empty(), "once");
}

#[test]
fn a_chain_of_fallbacks_sends_where_the_peer_was_seen_before_the_first() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    migrations.on_peer_migrated(local, address(2), false);
    migrations.on_peer_migrated(local, address(3), false);
    // quiche gives 3 up, falls back to 2, gives 2 up, falls back to 1.
    migrations.on_validation_failed(local, address(3));
    migrations.on_peer_migrated(local, address(2), true);
    migrations.on_validation_failed(local, address(2));
    migrations.on_peer_migrated(local, address(1), true);
    for port in [1, 2, 3] {
        assert_eq!(sent_to(&migrations, local, address(port)), address(3));
    }
    assert_eq!(migrations.fallbacks(), 2);
    // The peer's next packet from 3 revives it; validated, it is a move of the peer's.
    assert!(migrations.revive(address(3), local));
    migrations.on_peer_migrated(local, address(3), false);
    assert_eq!(sent_to(&migrations, local, address(1)), address(3));
    assert_eq!(sent_to(&migrations, local, address(2)), address(3));
}

#[test]
fn a_late_packet_from_a_path_left_revives_nothing() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    migrations.on_peer_migrated(local, address(2), false);
    // The probe of the path left was lost.
    migrations.on_validation_failed(local, address(1));
    assert!(!migrations.revive(address(1), local));
    assert_eq!(sent_to(&migrations, local, address(1)), address(2));
}

#[test]
fn a_revived_path_is_watched_for_its_next_failure() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    assert!(migrations.watched().is_empty());
    migrations.on_validation_failed(local, address(2));
    assert!(migrations.revive(address(2), local));
    assert_eq!(migrations.watched(), [(local, address(2))]);
    // Failed again, silently: the watch reports it, and the next packet revives it.
    migrations.on_validation_failed(local, address(2));
    assert!(migrations.revive(address(2), local));
    assert_eq!(migrations.watched().len(), 1);
}

#[test]
fn a_validated_path_is_not_revived() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    migrations.on_validation_failed(local, address(2));
    migrations.on_validated(local, address(2));
    assert!(!migrations.revive(address(2), local));
}

#[test]
fn the_paths_given_up_on_are_bounded() {
    let local = address(443);
    let mut migrations = Migrations::new(Some((local, address(1))));
    for port in 2..100 {
        migrations.on_validation_failed(local, address(port));
    }
    assert_eq!(migrations.failed.len(), MOST_PATHS_LEFT);
    assert!(migrations.revive(address(99), local));
    assert!(!migrations.revive(address(2), local), "the oldest went");
}

#[test]
fn without_a_known_path_nothing_is_probed() {
    let mut migrations = Migrations::new(None);
    assert!(
        migrations
            .on_peer_migrated(address(443), address(2), false)
            .is_empty()
    );
    assert_eq!(sent_to(&migrations, address(443), address(1)), address(1));
}
