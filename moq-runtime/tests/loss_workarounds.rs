//! What working around quiche's lossy-path bugs costs stays bounded once the loss is over;
//! and a close that was lost is sent again.
//!
//! After a probe timeout every send stream is parked (`quic/parking.rs`), and each "done"
//! from quiche is asked again once per parked stream, in case one of them is stuck at
//! the head of quiche's queue. Long-lived control streams stay parked until they are
//! written again, which may be never.
//!
//! Regression: every flush of such a connection went on asking again, once per parked
//! stream, for the rest of its life; a relay on a busy host (where a late ACK fires a
//! spurious probe timeout now and then) spent about a tenth more CPU per chat message
//! (BENCHMARKS.md, issue 26). Now the asking stops once a round found nothing behind the
//! parked streams.

mod common;

use std::time::{Duration, Instant};

use common::chat::raw_quic_chat;
use common::{BusyRuntime, connected_pair, run_until};
use moqx_net::model::TrackProducer;
use moqx_runtime::quic::QuicConnection;

/// Chat-shaped groups published after the probe timeout.
const GROUPS: u64 = 200;

#[test]
fn asking_past_parked_streams_stops_once_nothing_is_behind_them() {
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, "loss-workarounds", b"moq-lite-05");
    let mut chat = raw_quic_chat(&runtime, &client, &server);
    chat.publish(&runtime, &client, &server, 10, 1);

    // One group whose packets are lost: the server's probe timeout fires and parks
    // every send stream it has, the session's control streams among them.
    let before = server.loss_workarounds();
    send(&mut chat.track, 10);
    runtime.turn();
    lose_until_probe_timeout(&server);
    let swept = server.loss_workarounds();
    assert!(
        swept.park_sweeps > before.park_sweeps && swept.parked_streams > 0,
        "the probe timeout parks the streams: {swept:?}"
    );
    assert!(
        run_until(&runtime, &client, &server, || chat.received.get() == 11),
        "the lost group is sent again"
    );

    let settled = server.loss_workarounds();
    assert!(settled.parked_streams <= MOST_PARKED, "{settled:?}");
    chat.publish(&runtime, &client, &server, GROUPS, 1);
    let after = server.loss_workarounds();
    // One round per sweep: the first, and any spurious one a slow machine fires (an ACK
    // delayed past the probe timeout), each past the few streams it parked.
    let sweeps = after.park_sweeps - settled.park_sweeps;
    let asked = after.sends_past_parked - settled.sends_past_parked;
    assert!(
        asked <= (sweeps + 1) * MOST_PARKED as u64,
        "{asked} sends past parked streams over {GROUPS} groups and {sweeps} more sweeps: \
         at most one round per sweep, not one per flush ({after:?})"
    );
}

/// The most streams a sweep parks here: the session's control streams and the few
/// groups in flight.
const MOST_PARKED: usize = 16;

/// A connection that loses nothing never parks its streams for bytes kept, however its
/// congestion window limits it: large frames fill the window pass after pass, and the
/// check for a stream stuck at the head of quiche's queue (`quic/stall.rs`) finds the
/// bytes sent each time. (A sweep, and a `send` per parked stream after it, on every
/// flush of a media relay would cost more than the stalls it prevents.)
#[test]
fn a_window_limited_connection_never_looks_stuck() {
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, "window-limited", b"moq-lite-05");
    let mut chat = raw_quic_chat(&runtime, &client, &server);
    chat.publish(&runtime, &client, &server, 3, 1);
    let before = server.loss_workarounds();
    let frame = bytes::Bytes::from(vec![7u8; LARGE_FRAME]);
    for timestamp in 0..LARGE_GROUPS {
        let mut group = chat.track.append_group();
        group.write(timestamp, frame.clone());
        group.finish();
        let goal = chat.received.get() + 1;
        let received = &chat.received;
        assert!(
            run_until(&runtime, &client, &server, || received.get() >= goal),
            "large group {timestamp} arrived"
        );
    }
    let after = server.loss_workarounds();
    assert_eq!(
        after.kept_bytes_sweeps, before.kept_bytes_sweeps,
        "nothing was lost, nothing stuck: {after:?}"
    );
}

/// Large enough to take many congestion windows' worth of passes.
const LARGE_FRAME: usize = 200_000;

/// Large frames written, one group each.
const LARGE_GROUPS: u64 = 10;

/// A group that ends long after its last frame (media ends a group when the next one
/// starts, seconds later) ends at once: its lone FIN comes after bytes the peer has
/// acknowledged, which quiche cannot lose, so it is not held back a round trip.
///
/// Regression: every lone FIN was held, so a subscriber reading groups in order waited
/// for each group's end a probe timeout or more (media 1 -> 100 at 5 % loss: p99 244 ms).
#[test]
fn a_group_that_ends_long_after_its_last_frame_ends_at_once() {
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, "late-end", b"moq-lite-05");
    let mut chat = raw_quic_chat(&runtime, &client, &server);
    chat.publish(&runtime, &client, &server, 3, 1);
    let (track, received) = (&mut chat.track, chat.received.clone());
    // How long "long after" must be depends on the path's round trip, which a busy
    // machine stretches: waits from 50 ms, doubling, until a FIN goes unheld.
    let mut pause = Duration::from_millis(50);
    loop {
        let held = server.loss_workarounds().fins_held;
        let mut group = track.append_group();
        group.write(0, "frame");
        let goal = received.get() + 1;
        assert!(run_until(&runtime, &client, &server, || received.get() >= goal));
        let until = Instant::now() + pause;
        run_until(&runtime, &client, &server, || Instant::now() >= until);
        group.finish();
        let mut turns = 0;
        run_until(&runtime, &client, &server, || {
            turns += 1;
            turns > 10
        });
        if server.loss_workarounds().fins_held == held {
            break;
        }
        assert!(
            pause < Duration::from_secs(5),
            "every FIN after acknowledged bytes was held, {pause:?} after them too"
        );
        pause *= 2;
    }
}

/// Drops every packet the server sends until its probe timeout fired: its timers run
/// when due, and with its packets lost, one of the first of them is the probe timeout.
fn lose_until_probe_timeout(server: &QuicConnection) {
    let mut buf = [0u8; 65_536];
    let sweeps = server.loss_workarounds().park_sweeps;
    let mut timers_run = 0;
    while server.loss_workarounds().park_sweeps == sweeps {
        assert!(
            timers_run < MOST_TIMERS_BEFORE_A_PROBE,
            "no probe timeout fired in {timers_run} runs of the server's timers"
        );
        while let Ok(Some(_lost)) = server.send(&mut buf) {}
        match server.timeout() {
            Some(wait) if wait.is_zero() => {
                server.on_timeout(Instant::now());
                timers_run += 1;
            }
            Some(wait) => std::thread::sleep(wait),
            None => panic!("nothing in flight: no probe timeout to wait for"),
        }
    }
}

/// Timer runs (an ACK delay, a held FIN, a probe) within which a connection whose
/// packets are all lost fires a probe timeout.
const MOST_TIMERS_BEFORE_A_PROBE: u32 = 16;

/// Writes one chat message: a one-frame group.
fn send(track: &mut TrackProducer, timestamp: u64) {
    let mut group = track.append_group();
    group.write(timestamp, "hello");
    group.finish();
}

/// quiche sends a connection's CONNECTION_CLOSE once and drops what arrives while it
/// closes. Regression: with that one datagram lost, the peer kept the connection (a
/// chat member that had left, still in its room on the relay) until its idle timeout.
/// The datagram goes again when the peer shows it did not hear it, at a rate that halves
/// with each datagram received, a bounded number of times.
#[test]
fn a_lost_close_is_sent_again_while_the_peer_goes_on_sending() {
    let (client, server, _runtime) = a_lost_close("lost-close");
    let mut buf = [0u8; 65_536];

    // The server, not knowing, goes on sending; the client answers the 1st, 2nd and 4th
    // of its datagrams with the close, which is lost again each time.
    let mut answered = Vec::new();
    for received in 1..=5 {
        server.ping();
        while let Ok(Some((len, info))) = server.send(&mut buf) {
            let _ = client.recv(&mut buf[..len], info.from, info.to);
        }
        if let Ok(Some(_)) = client.send(&mut buf) {
            answered.push(received);
        }
        assert!(!server.is_closed());
    }
    assert_eq!(answered, [1, 2, 4]);

    // The next answer reaches it: the server closes with the client's code and reason.
    let mut delivered = false;
    for _ in 0..3 {
        server.ping();
        while let Ok(Some((len, info))) = server.send(&mut buf) {
            let _ = client.recv(&mut buf[..len], info.from, info.to);
        }
        while let Ok(Some((len, info))) = client.send(&mut buf) {
            let _ = server.recv(&mut buf[..len], info.from, info.to);
            delivered = true;
        }
    }
    assert!(delivered, "the close went again on the 8th datagram");
    assert!(
        server.close_reason().contains("leaving"),
        "the server heard the close: {}",
        server.close_reason()
    );
    assert_eq!(client.loss_workarounds().closes_resent, 4);
}

/// With a peer that sends nothing while we close, there is nothing to answer: the close
/// goes again one and two probe timeouts after it last went, and the second copy, heard,
/// closes the server with the client's code and reason.
#[test]
fn a_lost_close_is_sent_again_to_a_silent_peer() {
    let (client, server, _runtime) = a_lost_close("lost-close-silent");
    let mut buf = [0u8; 65_536];

    // Its timer, with the time it names (quiche's own timers read the clock, and close the
    // connection for good only three probe timeouts after the close).
    let first = client.status().close_resend_at.expect("a copy is due");
    client.on_timeout(first);
    let mut copies = 0;
    while let Ok(Some(_)) = client.send(&mut buf) {
        copies += 1; // lost as well
    }
    assert_eq!(copies, 1, "the close went again once");
    assert!(!server.is_closed());

    let second = client
        .status()
        .close_resend_at
        .expect("a second copy is due");
    assert!(second > first);
    client.on_timeout(second);
    while let Ok(Some((len, info))) = client.send(&mut buf) {
        let _ = server.recv(&mut buf[..len], info.from, info.to);
    }
    assert!(
        server.close_reason().contains("leaving"),
        "the server heard the close: {}",
        server.close_reason()
    );
    assert_eq!(
        client.status().close_resend_at,
        None,
        "two copies on the timer at most"
    );
    assert_eq!(client.loss_workarounds().closes_resent, 2);
}

/// A connected pair whose client closed with code 0x17, "leaving", in one datagram that
/// was lost.
fn a_lost_close(name: &str) -> (QuicConnection, QuicConnection, BusyRuntime) {
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, name, b"moq-lite-05");
    client.close(0x17, "leaving");
    let mut buf = [0u8; 65_536];
    let mut lost = 0;
    while let Ok(Some(_)) = client.send(&mut buf) {
        lost += 1;
    }
    assert_eq!(lost, 1, "the close is one datagram, lost");
    (client, server, runtime)
}
