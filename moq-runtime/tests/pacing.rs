//! Pacing: a packet quiche wants sent later is held until then, with a congestion
//! controller that paces (BBRv2), and nothing is held with one that does not (CUBIC).

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::chat::raw_quic_chat;
use common::{BusyRuntime, connected_pair_measuring};
use moqx_runtime::quic::QuicConnection;

/// The most quiche's pacer sends, in Mbit/s (quiche 0.30's BBRv2 reads
/// `set_max_pacing_rate` in Mbit/s; its documentation gives no unit): the
/// least it takes, at least 9.6 ms a 1,200-byte packet, far above the 1 ms within which a
/// packet counts as due, so a loop draining the connection meets a held packet however
/// slowly it runs. (Unlimited, BBR's own rate on the in-memory pump spaced packets about
/// 0.1 ms apart: a packet was held only if the loop ran faster than that for a whole
/// window, which a loaded machine's did not.)
const MAX_PACING_MBITS: u64 = 1;

/// The server's first RTT sample. quiche also caps its congestion window at 1.25 times the
/// pacing rate times the smoothed RTT: at the in-memory pump's microseconds of RTT that
/// cap let nothing be sent at all; with 400 ms, one packet leaves and the next is dated
/// over a second later.
const FIRST_RTT: Duration = Duration::from_millis(400);

#[test]
fn a_paced_packet_waits_for_its_send_time() {
    let (server, _runtime, _chat) =
        server_with_a_burst(quiche::CongestionControlAlgorithm::Bbr2Gcongestion);
    let mut buf = [0u8; 65_536];
    let sent = drain(&server, &mut buf);
    assert!(server.packets_paced() >= 1, "{sent} sent, none held");
    let status = server.status();
    let at = status.paced_at.expect("a packet is held");
    // Read before the timer is: the timer can only be nearer by then.
    let now = Instant::now();
    let timeout = server.timeout().expect("its send time is a timer");
    assert!(timeout <= at.saturating_duration_since(now) + Duration::from_millis(1));
    assert_eq!(
        server.send_paced(&mut buf, Instant::now().min(at - Duration::from_millis(2))),
        Ok(None),
        "not before its time"
    );
    let datagram = server
        .send_paced(&mut buf, at)
        .expect("no error")
        .expect("sent at its time");
    assert_eq!(datagram.info.at, at);
    assert!(server.status().paced_at.is_none_or(|next| next > at));
}

#[test]
fn an_unpaced_controller_holds_nothing() {
    let (server, _runtime, _chat) = server_with_a_burst(quiche::CongestionControlAlgorithm::CUBIC);
    let mut buf = [0u8; 65_536];
    let sent = drain(&server, &mut buf);
    assert!(sent >= 10, "a window's worth sent at once: {sent}");
    assert_eq!(server.packets_paced(), 0);
    assert_eq!(server.status().paced_at, None);
}

/// A server whose congestion controller is `algorithm`, with 64 groups of 4 KB written
/// to its client and not yet sent.
fn server_with_a_burst(
    algorithm: quiche::CongestionControlAlgorithm,
) -> (QuicConnection, BusyRuntime, common::chat::ChatSubscription) {
    let runtime = BusyRuntime::default();
    let (client, server) =
        connected_pair_measuring(&runtime, "pacing", b"moq-lite-05", FIRST_RTT, |config| {
            config.set_cc_algorithm(algorithm);
            config.set_max_pacing_rate(MAX_PACING_MBITS);
        });
    let mut chat = raw_quic_chat(&runtime, &client, &server);
    chat.publish(&runtime, &client, &server, 1, 1);
    for index in 0..64 {
        let mut group = chat.track.append_group();
        group.write(index, Bytes::from(vec![index as u8; 4_000]));
        group.finish();
    }
    runtime.turn();
    (server, runtime, chat)
}

/// Sends what `server` lets go now (dropping it), returning how many packets.
fn drain(server: &QuicConnection, buf: &mut [u8]) -> usize {
    let mut sent = 0;
    while let Ok(Some(_)) = server.send_paced(buf, Instant::now()) {
        sent += 1;
    }
    sent
}
