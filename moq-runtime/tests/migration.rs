//! A peer that moves to a new address (a NAT that rebinds) while data is in flight to
//! its old one gets that data all the same.
//!
//! Regression: quiche (0.30, cloudflare/quiche#2452) detects a loss only from an
//! acknowledgement of a later packet on the same path, and sends nothing more on the
//! path the peer left; its probe timeout there resends the frames of the two oldest
//! packets, again and again. Data lost at the old address was never sent again: a media
//! subscriber behind a NAT that rebinds stalled for good on its first rebinding
//! (`moq-bench soak --rebind-seconds`), its connection otherwise healthy.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::chat::raw_quic_chat;
use common::{BusyRuntime, CLIENT_ADDRESS, connected_pair, connected_pair_with};
use moqx_runtime::quic::{LossWorkarounds, QuicConnection};
use moqx_runtime::quiche_config::MAX_CLIENT_PATHS;

/// Groups written just before the rebinding, of [`FRAME`] bytes each: a few dozen
/// packets in flight, most of them lost.
const GROUPS: u64 = 12;
/// The bytes of each group of the burst.
const FRAME: usize = 4_000;

#[test]
fn data_in_flight_to_the_address_a_peer_left_is_sent_again() {
    let workarounds = rebinding_mid_burst(None);
    // At least once: a stall longer than the probe's timeout (a loaded machine) makes
    // quiche count it lost and probe again.
    assert!(workarounds.paths_left_probed >= 1, "{workarounds:?}");
}

/// The probe of the path left can be lost as well (quiche then gives that path up at
/// once): whichever of the server's first packets after the probe was queued is lost,
/// the probe among them, everything arrives.
#[test]
fn data_in_flight_to_the_address_a_peer_left_is_sent_again_if_a_probe_is_lost() {
    let mut probed_again = false;
    for lost in 0..8 {
        let workarounds = rebinding_mid_burst(Some(lost));
        probed_again |= workarounds.paths_left_probed > 1;
    }
    assert!(probed_again, "one of the losses was the probe's");
}

/// The server's first packets to the client's new address can be lost too, its
/// PATH_CHALLENGE among them, and quiche retries a lost challenge only at the new path's
/// probe timeout, which nothing arms: a client that keeps sending small packets (a chat
/// member) stayed on an unvalidated path, the server able to send it only three times
/// what it sent, for good. Whichever of the first packets is lost, everything arrives.
#[test]
fn a_new_address_whose_challenge_is_lost_is_validated_all_the_same() {
    let mut revalidated = false;
    for lost in 0..4 {
        let workarounds = rebinding_with(None, Some(lost));
        revalidated |= workarounds.new_paths_revalidated > 0;
    }
    assert!(revalidated, "one of the losses was the challenge's");
}

/// Every challenge to the client's new address can be lost, the ones asked for again
/// included, until quiche's own probe timeout on the new path fires: quiche then marks the
/// path failed (a server path's anti-amplification credit is spent by then) and falls back
/// to the address the client left. The client's next packet from its new address made
/// quiche take the failed path as the active one, with no working path left: every later
/// packet was refused (`InvalidState`) and the connection closed with a protocol
/// violation, in a soak with 1 % loss and rebinding every 20 s. Everything arrives.
#[test]
fn a_new_address_that_quiche_gave_up_on_is_validated_again() {
    common::show_logs();
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, "migration", b"moq-lite-05");
    let mut chat = raw_quic_chat(&runtime, &client, &server);
    chat.publish(&runtime, &client, &server, 3, 1);
    let settled = chat.received.get();

    let mut nat = Nat::new();
    let old = nat.public;
    nat.rebind();
    nat.lose_until_fallback = true;
    nat.lose_at_new = Some(usize::MAX);
    let new = nat.public;
    // Pings from the new address until the server gives its path up and falls back.
    let mut moved = false;
    let fell_back = nat.run_until(&runtime, &client, &server, &mut || {
        let peer = server.peer_address();
        moved |= peer == Some(new);
        moved && peer == Some(old)
    });
    assert!(fell_back, "the server never gave the new address up");

    for index in 0..MORE {
        let mut group = chat.track.append_group();
        group.write(index, "hello");
        group.finish();
    }
    let goal = settled + MORE;
    let received = &chat.received;
    let arrived = nat.run_until(&runtime, &client, &server, &mut || {
        received.get() == goal && server.peer_address() == Some(new)
    });
    assert!(
        arrived,
        "{} of {MORE} groups arrived after the server gave the new address up, the server \
         at {:?} ({}; {:?})",
        received.get() - settled,
        server.peer_address(),
        server.close_reason(),
        server.loss_workarounds(),
    );
    assert!(server.loss_workarounds().failed_paths_revived > 0);
}

/// The path the client leaves can be the one quiche gives up on: a challenge of its
/// validation still in flight (the first was lost, a later one answered) counts as a lost
/// probe when the path's timer fires, which it does once what was sent there after the
/// NAT rebound goes unanswered. quiche falls back to the older path and the client then
/// shows up at its new address. What was in flight to the path given up on was stranded
/// there: quiche resent the frames of two packets a probe timeout, backed off (a chat
/// reader passed over a message 5 s late after a rebinding in the soak). Everything
/// arrives.
#[test]
fn data_in_flight_to_a_path_given_up_on_as_the_peer_left_it_is_sent_again() {
    common::show_logs();
    let runtime = BusyRuntime::default();
    let (client, server) = pair_keeping_client_paths(&runtime);
    let mut chat = raw_quic_chat(&runtime, &client, &server);
    chat.publish(&runtime, &client, &server, 3, 1);

    // The first move, its first challenge lost: the path is validated by a later one.
    let mut nat = Nat::new();
    let first = nat.public;
    nat.rebind();
    nat.lose_at_new = Some(0);
    let second = nat.public;
    let moved = nat.run_until(&runtime, &client, &server, &mut || {
        server.peer_address() == Some(second) && server.loss_workarounds().paths_left_probed > 0
    });
    assert!(moved, "the client's first move ({})", server.close_reason());
    nat.lose_at_new = None;
    let settled = chat.received.get();

    // A burst in flight to the second address when the NAT rebinds again.
    for index in 0..GROUPS {
        let mut group = chat.track.append_group();
        group.write(index, Bytes::from(vec![index as u8; FRAME]));
        group.finish();
    }
    runtime.turn();
    let mut buf = [0u8; 65_536];
    while let Ok(Some(_)) = server.send(&mut buf) {
        nat.lost += 1;
    }
    assert!(nat.lost >= 4, "only {} packets in flight", nat.lost);
    // The client, which only receives, says nothing the server hears until it notices
    // the silence (a second, in the endpoint; its ACK of what came before the burst is
    // lost): the server's timer on the path left fires first.
    nat.rebind();
    nat.client_silent = true;
    let fell_back = nat.run_until(&runtime, &client, &server, &mut || {
        server.peer_address() == Some(first) || server.is_closed()
    });
    assert!(
        fell_back && !server.is_closed(),
        "quiche did not give the path left up (the case this test is for): {}",
        server.close_reason()
    );
    nat.client_silent = false;
    nat.pings = true;

    let goal = settled + GROUPS;
    let received = &chat.received;
    let arrived = nat.run_until(&runtime, &client, &server, &mut || received.get() == goal);
    assert!(
        arrived,
        "{} of {GROUPS} groups arrived after the rebinding ({}; {:?})",
        received.get() - settled,
        server.close_reason(),
        server.loss_workarounds(),
    );
    assert_eq!(server.peer_address(), Some(nat.public));
}

/// quiche can give the client's validated path up while the client is still there, and
/// fall back to the address it left: the answer to one challenge of the path's validation
/// was lost and the packet that carried the challenge acknowledged all the same, so quiche
/// keeps that challenge in flight until the path's next loss-detection timer, which counts
/// it lost and fails the path. Sent to the address left, nothing reached a client that
/// only answers what it receives; and in the rebinding soak, where quiche then gave the
/// address it fell back to up as well, the connection closed without a word. Whichever
/// of the client's first packets from its new address is lost, everything arrives.
#[test]
fn a_client_that_stayed_where_it_was_gets_what_is_sent_after_quiche_falls_back() {
    common::show_logs();
    // Building the case takes no quiche timer firing on the new path while it is being
    // validated (which would count the challenge lost before it is stale): on a machine
    // busy enough for a probe timeout there, it is built again.
    let mut fell_back = false;
    for _attempt in 0..3 {
        for lost in 1..3 {
            fell_back |= stale_challenge_then_loss(lost).fallbacks > 0;
        }
        if fell_back {
            break;
        }
    }
    assert!(
        fell_back,
        "quiche never fell back (the case this test is for)"
    );
}

/// The client moves, its packet number `lost` from the new address lost (the answer to a
/// challenge, for one of them), then a packet of the server's to the new address is lost
/// once the path is validated, and the client only answers what it receives: asserts
/// that every group arrives and the server ends up at the client's address.
fn stale_challenge_then_loss(lost: usize) -> LossWorkarounds {
    let runtime = BusyRuntime::default();
    let (client, server) = pair_keeping_client_paths(&runtime);
    let mut chat = raw_quic_chat(&runtime, &client, &server);
    chat.publish(&runtime, &client, &server, 3, 1);

    let mut nat = Nat::new();
    nat.rebind();
    nat.pings = true;
    nat.lose_from_client = Some(nat.from_client + lost);
    let new = nat.public;
    let validated = nat.run_until(&runtime, &client, &server, &mut || {
        server.peer_address() == Some(new) && server.loss_workarounds().paths_left_probed > 0
    });
    assert!(
        validated,
        "lost {lost}: the move ({})",
        server.close_reason()
    );
    let settled = chat.received.get();

    // The client's answer to the probe of the address it left is lost too (the packet
    // that carried the probe acknowledged by the client's next one): quiche keeps that
    // challenge in flight as well. The client's pings go on for a while, so that it
    // finds its own packet lost and has nothing more in flight.
    nat.lose_from_client = Some(nat.from_client);
    let quiet_from = std::time::Instant::now() + QUIET_AFTER;
    nat.run_until(&runtime, &client, &server, &mut || {
        std::time::Instant::now() >= quiet_from
    });
    // The client now only answers what it receives. The server's next packets, the
    // group's among them, are lost: the path's loss-detection timer fires.
    nat.pings = false;
    nat.quietly_lose_at_new = nat.to_new..nat.to_new + 3;
    let received = &chat.received;
    let mut arrived = true;
    for index in 0..MORE {
        let mut group = chat.track.append_group();
        group.write(index, "hello");
        group.finish();
        let goal = settled + index + 1;
        arrived = nat.run_until(&runtime, &client, &server, &mut || {
            received.get() == goal && server.peer_address() == Some(new)
        });
        if !arrived {
            break;
        }
    }
    let workarounds = server.loss_workarounds();
    assert!(
        arrived,
        "lost {lost}: {} of {MORE} groups arrived, the server at {:?} ({}; {workarounds:?})",
        received.get() - settled,
        server.peer_address(),
        server.close_reason(),
    );
    workarounds
}

/// How long the client pings once the answer to the probe of its old address was lost.
const QUIET_AFTER: Duration = Duration::from_millis(300);

/// quiche 0.30 keeps a path for each address a client was seen at and frees none of them
/// (cloudflare/quiche#2743): at its default of 2, a client behind a NAT that rebinds
/// could move once, and at the next rebinding its packets were dropped until the
/// connection timed out (the soak, rebinding every 20 s: sessions lost at 100 s). The
/// server's connections keep [`MAX_CLIENT_PATHS`]: the client moves that many times less
/// one (its first address), and every group arrives at each.
#[test]
fn a_client_moves_as_many_times_as_the_server_keeps_paths() {
    common::show_logs();
    let runtime = BusyRuntime::default();
    let (client, server) = pair_keeping_client_paths(&runtime);
    let mut chat = raw_quic_chat(&runtime, &client, &server);
    chat.publish(&runtime, &client, &server, 1, 1);
    let mut nat = Nat::new();
    nat.pings = true;
    for moves in 1..MAX_CLIENT_PATHS {
        move_and_deliver(&mut nat, &runtime, (&client, &server), &mut chat, moves);
    }
}

/// The client's NAT rebinds (its `moves`th move), the server publishes a group, and the
/// group arrives with the server at the client's new address.
fn move_and_deliver(
    nat: &mut Nat,
    runtime: &BusyRuntime,
    (client, server): (&QuicConnection, &QuicConnection),
    chat: &mut common::chat::ChatSubscription,
    moves: u64,
) {
    nat.rebind();
    let mut group = chat.track.append_group();
    group.write(moves, "hello");
    group.finish();
    let goal = 1 + moves;
    let public = nat.public;
    let received = &chat.received;
    // The server may give the new address up for a moment on a busy machine (an answer
    // to its challenge late past a probe timeout) and validate it again at the client's
    // next packet: what counts is where it ends up.
    assert!(
        nat.run_until(runtime, client, server, &mut || {
            received.get() == goal && server.peer_address() == Some(public)
        }),
        "move {moves}: the group did not arrive, or the server is not at the client's \
         address ({:?}; {}; {:?})",
        server.peer_address(),
        server.close_reason(),
        server.loss_workarounds(),
    );
}

/// A client that switches connection IDs as its NAT rebinds retires the ID it used in the
/// first packet from its new address, so the path it left keeps an ID quiche no longer
/// knows (quiche forgets a retired ID only on the path it was first seen on, not on one
/// that took it over at the previous rebinding). quiche 0.30 looks that ID up for every
/// packet it builds on the path and fails the whole `send` when it is gone
/// (`quic/unsendable.rs`); the path left is probed (`quic/migration.rs`) and quiche
/// picks a path to probe before any other, so every send failed and the server sent
/// nothing more, ever: chat members of the CI soak were cut off at a rebinding that fell
/// on their connection-ID rotation. Everything arrives, at that move and the next.
#[test]
fn a_client_that_switches_connection_ids_as_its_nat_rebinds_keeps_its_connection() {
    common::show_logs();
    let runtime = BusyRuntime::default();
    let (client, server) = pair_keeping_client_paths(&runtime);
    // Spare IDs both ways, as the endpoint gives them: one of the server's for the client
    // to switch to, and the client's for each new path of the server's.
    server
        .issue_cid(&[5; 16], 5)
        .expect("the server issues an ID");
    for spare in 0..4u8 {
        client
            .issue_cid(&[16 + spare; 16], u128::from(16 + spare))
            .expect("the client issues an ID");
    }
    let mut chat = raw_quic_chat(&runtime, &client, &server);
    chat.publish(&runtime, &client, &server, 1, 1);
    let mut nat = Nat::new();
    nat.pings = true;
    for moves in 1..=3u64 {
        if moves == 2 {
            assert!(
                client.rotate_cid(),
                "the client had no spare ID to switch to"
            );
        }
        move_and_deliver(&mut nat, &runtime, (&client, &server), &mut chat, moves);
    }
    assert!(
        server.loss_workarounds().unsendable_paths > 0,
        "the path left never held a retired ID: the test no longer reproduces the defect"
    );
}

/// A connected pair whose server keeps [`MAX_CLIENT_PATHS`] paths, as the endpoint's
/// connections do.
fn pair_keeping_client_paths(runtime: &BusyRuntime) -> (QuicConnection, QuicConnection) {
    connected_pair_with(runtime, "migration", b"moq-lite-05", |config| {
        config.set_active_connection_id_limit(MAX_CLIENT_PATHS);
    })
}

/// [`rebinding_with`] losing nothing at the new address.
fn rebinding_mid_burst(lost_after: Option<usize>) -> LossWorkarounds {
    rebinding_with(lost_after, None)
}

/// A burst of groups whose packets are in flight when the client's NAT rebinds (the
/// server's packet number `lost_after` after the path left was probed lost too, if
/// any); asserts
/// that every group arrives, and that the connection goes on at the new address.
fn rebinding_with(lost_after: Option<usize>, lost_at_new: Option<usize>) -> LossWorkarounds {
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, "migration", b"moq-lite-05");
    let mut chat = raw_quic_chat(&runtime, &client, &server);
    chat.publish(&runtime, &client, &server, 3, 1);
    let settled = chat.received.get();

    for index in 0..GROUPS {
        let mut group = chat.track.append_group();
        group.write(index, Bytes::from(vec![index as u8; FRAME]));
        group.finish();
    }
    runtime.turn();
    // The burst's first packet arrives; the rest are on their way to the client's old
    // public address when the NAT gives it a new one, and are lost there.
    let mut nat = Nat::new();
    let mut buf = [0u8; 65_536];
    let mut first = true;
    while let Ok(Some((len, info))) = server.send(&mut buf) {
        if first {
            first = false;
            let _ = client.recv(&mut buf[..len], info.from, info.to);
        } else {
            nat.lost += 1;
        }
    }
    assert!(nat.lost >= 4, "only {} packets in flight", nat.lost);
    nat.rebind();
    nat.lose = lost_after;
    nat.lose_at_new = lost_at_new;
    let public = nat.public;

    let goal = settled + GROUPS;
    let received = &chat.received;
    let arrived = nat.run_until(&runtime, &client, &server, &mut || {
        received.get() == goal && server.peer_address() == Some(public)
    });
    let workarounds = server.loss_workarounds();
    assert!(
        arrived,
        "{} of {GROUPS} groups arrived after the rebinding, the server at {:?} ({} packets \
         lost at the old address; {workarounds:?})",
        received.get() - settled,
        server.peer_address(),
        nat.lost,
    );

    // The connection goes on at the new address, nothing sent to the old one.
    let lost = nat.lost;
    for index in 0..MORE {
        let mut group = chat.track.append_group();
        group.write(index, "hello");
        group.finish();
    }
    let goal = goal + MORE;
    assert!(
        nat.run_until(&runtime, &client, &server, &mut || received.get() == goal),
        "{} of {MORE} later groups arrived",
        received.get() + MORE - goal
    );
    assert_eq!(
        nat.lost, lost,
        "packets went to the address the client left"
    );
    workarounds
}

/// Groups written once the connection moved.
const MORE: u64 = 20;

/// The client's NAT: the address the server sees the client at, and what it drops.
struct Nat {
    /// The client's public address now.
    public: SocketAddr,
    /// Server packets dropped: addressed to a public address the NAT no longer maps, or
    /// [`lose`](Self::lose).
    lost: usize,
    /// The server packet (counted from the first probe of the path left) that is lost on
    /// the way.
    lose: Option<usize>,
    /// Server packets that reached the NAT since the path left was first probed.
    forwarded: usize,
    /// The server packet to the new address (counted from the rebinding) that is lost;
    /// the client then sends a PING every [`CLIENT_PING`], as a chat member sends.
    lose_at_new: Option<usize>,
    /// Server packets to the new address (counted as [`to_new`](Self::to_new)) that are
    /// lost, the client's pings unchanged.
    quietly_lose_at_new: std::ops::Range<usize>,
    /// Server packets to the new address so far.
    to_new: usize,
    /// Every server packet to the new address is lost until the server sends to another
    /// after it (it gave the new address up).
    lose_until_fallback: bool,
    /// The client sends a PING every [`CLIENT_PING`] (as it does with `lose_at_new`).
    pings: bool,
    /// The client's packets are lost (it says nothing the server hears).
    client_silent: bool,
    /// The client packet (counted as [`from_client`](Self::from_client)) that is lost.
    lose_from_client: Option<usize>,
    /// Client packets so far.
    from_client: usize,
}

/// How long [`Nat::run_until`] sleeps when no packet moved: the timers' resolution.
const IDLE: Duration = Duration::from_millis(1);

/// How often the client sends something of its own while [`Nat::lose_at_new`] is set.
const CLIENT_PING: Duration = Duration::from_millis(20);

impl Nat {
    fn new() -> Self {
        Self {
            public: CLIENT_ADDRESS.parse().unwrap(),
            lost: 0,
            lose: None,
            forwarded: 0,
            lose_at_new: None,
            quietly_lose_at_new: 0..0,
            to_new: 0,
            lose_until_fallback: false,
            pings: false,
            client_silent: false,
            lose_from_client: None,
            from_client: 0,
        }
    }

    /// A new public port for the client, as a NAT whose mapping timed out.
    fn rebind(&mut self) {
        self.public.set_port(self.public.port() + 1);
    }

    /// Moves packets both ways through the NAT, runs the sessions, until `done`: against
    /// hangs, at most as many rounds as 10 s of them (real timers fire in between).
    fn run_until(
        &mut self,
        runtime: &BusyRuntime,
        client: &QuicConnection,
        server: &QuicConnection,
        done: &mut dyn FnMut() -> bool,
    ) -> bool {
        let start = std::time::Instant::now();
        let mut buf = [0u8; 65_536];
        let mut pinged = std::time::Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if (self.pings || self.lose_at_new.is_some()) && pinged.elapsed() >= CLIENT_PING {
                client.ping();
                pinged = std::time::Instant::now();
            }
            let mut moved = false;
            while let Ok(Some((len, info))) = client.send(&mut buf) {
                moved = true;
                let lose = self.lose_from_client == Some(self.from_client);
                self.from_client += 1;
                if !self.client_silent && !lose {
                    let _ = server.recv(&mut buf[..len], self.public, info.to);
                }
            }
            while let Ok(Some((len, info))) = server.send(&mut buf) {
                moved = true;
                let probing = server.loss_workarounds().paths_left_probed > 0;
                let mut lose = probing && self.lose == Some(self.forwarded);
                self.forwarded += usize::from(probing);
                if info.to != self.public && self.to_new > 0 {
                    self.lose_until_fallback = false;
                }
                if info.to == self.public {
                    lose |= self.lose_until_fallback
                        || self.lose_at_new == Some(self.to_new)
                        || self.quietly_lose_at_new.contains(&self.to_new);
                    self.to_new += 1;
                }
                if info.to == self.public && !lose {
                    let client_address = CLIENT_ADDRESS.parse().unwrap();
                    let _ = client.recv(&mut buf[..len], info.from, client_address);
                } else {
                    self.lost += 1;
                }
            }
            for connection in [client, server] {
                if connection.timeout() == Some(Duration::ZERO) {
                    connection.on_timeout(std::time::Instant::now());
                }
            }
            runtime.turn();
            if done() {
                return true;
            }
            if !moved {
                // Idle until a timer or the next ping: the tests of this file run side by
                // side, and a loop that spins starves the others of the CPU, which delays
                // their ACKs past a probe timeout.
                std::thread::sleep(IDLE);
            }
        }
        false
    }
}
