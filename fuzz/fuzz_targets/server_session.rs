//! A whole server session (a relay's: both halves on one origin, with a live broadcast)
//! fed arbitrary bytes on arbitrary streams, in virtual time. Whatever arrives: no panic,
//! and what the peer made the session hold stays within its configured bounds (announced
//! broadcasts and their path bytes, requests served at once); the session ends, if it
//! ends, with a code.
//!
//! The fuzzer is both sides of a peer: it opens streams of its own, and it accepts the
//! streams the relay opens (its announce request, which the peer's broadcasts enter
//! through; TRACK and SUBSCRIBE requests for the tracks the relay's readers want of those
//! broadcasts) and answers them with fuzz bytes. So the relay's readers of announcements
//! (-06's typed START/END/RESTART with implicit ids, -03's hop counts), of TRACK_INFO and
//! of SUBSCRIBE_OK/START/END/DROP are all reached.
//!
//! On a moq-transport draft (14, 16, 18) the same program reaches the control streams,
//! SETUP, request ids, SUBSCRIBE and PUBLISH_NAMESPACE handling and subgroup streams.
//!
//! Input: the session's version (the first byte: -05, -04, -03, -06-wip, moqt-14, -16,
//! -18), then a program
//! of operations, each a byte and its arguments: open a uni or bidi stream, accept one the
//! relay opened, write the next bytes to one, finish or reset one, let time pass.
#![no_main]

use std::collections::HashSet;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use moqx_kio::Waiter;
use moqx_net::model::{Announced, Announcement, BroadcastProducer, Origin, PendingTrack, Track};
use moqx_net::runtime::test::{LinkConfig, TestRecvStream, TestRuntime, TestSendStream};
use moqx_net::session::{self, SessionConfig};
use moqx_net::transport::{RecvStream, SendStream, Session as _};

/// The bounds under test, small so that inputs reach them.
const MAX_ANNOUNCES: usize = 8;
const MAX_ANNOUNCE_PATH_BYTES: usize = 512;
const MAX_REQUESTS: usize = 4;

fuzz_target!(|data: &[u8]| {
    let Some((&version, data)) = data.split_first() else {
        return;
    };
    let version = moq_fuzz::session_version(version);
    let runtime = TestRuntime::new(1, Instant::now());
    let origin = Origin::new();
    let live = BroadcastProducer::new();
    let mut track = live.create_track(Track::new("t"));
    origin
        .publish("live", &live)
        .expect("the whole origin takes any path");
    let mut group = track.append_group();
    group.write(0, "cached");
    group.finish();

    let (mut client, server_end) = runtime.connect({
        let mut link_config = LinkConfig::default();
        link_config.protocol = Some(version.alpn().to_owned());
        link_config
    });
    let server = session::accept(runtime.clone(), server_end, {
        let mut session_config = SessionConfig::default();
        session_config.publish = Some(origin.clone());
        session_config.subscribe = Some(origin.clone());
        session_config.limits.max_message_bytes = 4096;
        session_config.limits.max_setup_bytes = 4096;
        session_config.limits.max_announces = MAX_ANNOUNCES;
        session_config.limits.max_announce_path_bytes = MAX_ANNOUNCE_PATH_BYTES;
        session_config.limits.max_subscriptions = MAX_REQUESTS;
        session_config.limits.max_announce_requests = 2;
        session_config.limits.max_group_frames = 16;
        session_config.limits.max_group_bytes = 4096;
        session_config.limits.max_frame_size = 1024;
        session_config.version = version;
        session_config
    });

    let waiter = Waiter::new(Waker::noop());
    let mut streams: Vec<TestSendStream> = Vec::new();
    // Receive halves, held open and drained, each with a waiter of its own: one waiter
    // registered on every stream would dedupe each registration against all the others
    // (its memo is a list), quadratic in the streams an input opens.
    let mut kept: Vec<(TestRecvStream, Waiter)> = Vec::new();
    // What the peer announced, as the origin tells it; and readers of each such
    // broadcast's track "t", which make the relay open TRACK/SUBSCRIBE streams to it.
    let mut announced = origin.announced("");
    let mut peer = Announcements::default();
    let mut readers = Vec::new();
    let mut input = data.iter().copied();
    while let Some(op) = input.next() {
        match op % 8 {
            6 => {
                if let Poll::Ready(Ok(recv)) = client.poll_accept_uni(&waiter) {
                    kept.push((recv, Waiter::new(Waker::noop())));
                }
            }
            7 => {
                if let Poll::Ready(Ok((send, recv))) = client.poll_accept_bidi(&waiter) {
                    streams.push(send);
                    kept.push((recv, Waiter::new(Waker::noop())));
                }
            }
            0 => {
                if let Poll::Ready(Ok(stream)) = client.poll_open_uni(&waiter) {
                    streams.push(stream);
                }
            }
            1 => {
                if let Poll::Ready(Ok((send, recv))) = client.poll_open_bidi(&waiter) {
                    streams.push(send);
                    kept.push((recv, Waiter::new(Waker::noop())));
                }
            }
            2 => {
                let (Some(which), Some(len)) = (input.next(), input.next()) else {
                    break;
                };
                let bytes: Vec<u8> = input.by_ref().take(usize::from(len)).collect();
                if let Some(stream) = pick(&mut streams, which) {
                    let _ = stream.poll_write(&waiter, &mut Bytes::from(bytes));
                }
            }
            3 => {
                if let Some(stream) = input.next().and_then(|which| pick(&mut streams, which)) {
                    let _ = stream.finish();
                }
            }
            4 => {
                if let Some(stream) = input.next().and_then(|which| pick(&mut streams, which)) {
                    stream.reset(0);
                }
            }
            _ => {
                let millis = input.next().unwrap_or(0);
                runtime.advance(Duration::from_millis(u64::from(millis)));
            }
        }
        runtime.run_until_stalled();
        for (recv, waiter) in &mut kept {
            while let Poll::Ready(Ok(Some(_))) = recv.poll_read(waiter) {}
        }
        peer.follow(&mut announced, &waiter, &mut readers);
        check(&server, &origin, &peer);
    }
    runtime.advance(Duration::from_millis(100));
    peer.follow(&mut announced, &waiter, &mut readers);
    check(&server, &origin, &peer);
    // End it: the session machine finishes and the runtime lets go of it (a machine still
    // running when the runtime is dropped would be reported as a leak).
    server.close(moqx_net::Error::Cancel);
    drop((streams, kept, client, readers, announced));
    // The close waits at most a second for the transport to confirm.
    runtime.advance(Duration::from_millis(1500));
    assert!(server.is_closed(), "the session ends when asked");
    drop(track);
});

fn pick(streams: &mut [TestSendStream], which: u8) -> Option<&mut TestSendStream> {
    let len = streams.len();
    (len > 0).then(|| &mut streams[usize::from(which) % len])
}

/// The paths the peer has active in the origin (every path but the harness's `live`).
#[derive(Default)]
struct Announcements {
    active: HashSet<String>,
}

impl Announcements {
    /// Takes every change the origin announced since the last call; starts a reader of
    /// track `t` for each newly active path.
    fn follow(
        &mut self,
        announced: &mut Announced,
        waiter: &Waiter,
        readers: &mut Vec<PendingTrack>,
    ) {
        while let Poll::Ready(announcement) = announced.poll_next(waiter) {
            match announcement {
                Announcement::Active { path, broadcast } if path.as_str() != "live" => {
                    if self.active.insert(path.as_str().to_owned()) && readers.len() < 64 {
                        readers.push(broadcast.subscribe_track("t"));
                    }
                }
                Announcement::Active { .. } => {}
                Announcement::Ended { path } => {
                    self.active.remove(path.as_str());
                }
            }
        }
        for reader in readers.iter_mut() {
            let _ = reader.poll_track(waiter);
        }
    }
}

/// The session's bounds hold: the peer's announcements (count and path bytes) and the
/// requests served at once.
fn check(server: &session::Session, origin: &Origin, peer: &Announcements) {
    assert!(
        origin.broadcast_count() <= 1 + MAX_ANNOUNCES,
        "{} broadcasts",
        origin.broadcast_count()
    );
    assert!(
        peer.active.len() <= MAX_ANNOUNCES,
        "{} announced",
        peer.active.len()
    );
    let path_bytes: usize = peer.active.iter().map(String::len).sum();
    assert!(
        path_bytes <= MAX_ANNOUNCE_PATH_BYTES,
        "{path_bytes} bytes of announced paths"
    );
    let counters = server.counters();
    assert!(counters.subscriptions_active as usize <= MAX_REQUESTS);
}
