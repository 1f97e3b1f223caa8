//! A whole server session (a relay's: both halves on one origin, with a live broadcast)
//! fed arbitrary bytes on arbitrary streams, in virtual time. Whatever arrives: no panic,
//! and what the peer made the session hold stays within its configured bounds (announced
//! broadcasts, requests served at once); the session ends, if it ends, with a code.
//!
//! Input: the session's version (the first byte: -05, -04, -03, -06-wip), then a program
//! of operations, each a byte and its arguments: open a uni or bidi stream, write the next
//! bytes to one, finish or reset one, let time pass.
#![no_main]

use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kio::Waiter;
use libfuzzer_sys::fuzz_target;
use moq_net::coding::Version;
use moq_net::model::{BroadcastProducer, Origin, Track};
use moq_net::runtime::test::{LinkConfig, TestRuntime, TestSendStream};
use moq_net::session::{self, SessionConfig};
use moq_net::transport::{SendStream, Session as _};

/// The bounds under test, small so that inputs reach them.
const MAX_ANNOUNCES: usize = 8;
const MAX_REQUESTS: usize = 4;

fuzz_target!(|data: &[u8]| {
    let Some((&version, data)) = data.split_first() else {
        return;
    };
    let version = [
        Version::Lite05,
        Version::Lite04,
        Version::Lite03,
        Version::Lite06Wip,
    ][usize::from(version % 4)];
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

    let (mut client, server_end) = runtime.connect(LinkConfig {
        protocol: Some(version.alpn().to_owned()),
        ..LinkConfig::default()
    });
    let server = session::accept(
        runtime.clone(),
        server_end,
        SessionConfig {
            publish: Some(origin.clone()),
            subscribe: Some(origin.clone()),
            max_message_bytes: 4096,
            max_setup_bytes: 4096,
            max_announces: MAX_ANNOUNCES,
            max_announce_path_bytes: 512,
            max_subscriptions: MAX_REQUESTS,
            max_announce_requests: 2,
            max_group_frames: 16,
            max_group_bytes: 4096,
            max_frame_size: 1024,
            version,
            ..SessionConfig::default()
        },
    );

    let waiter = Waiter::new(Waker::noop());
    let mut streams: Vec<TestSendStream> = Vec::new();
    let mut kept = Vec::new(); // bidi receive halves, held open
    let mut input = data.iter().copied();
    while let Some(op) = input.next() {
        match op % 6 {
            0 => {
                if let Poll::Ready(Ok(stream)) = client.poll_open_uni(&waiter) {
                    streams.push(stream);
                }
            }
            1 => {
                if let Poll::Ready(Ok((send, recv))) = client.poll_open_bidi(&waiter) {
                    streams.push(send);
                    kept.push(recv);
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
        check(&server, &origin);
    }
    runtime.advance(Duration::from_millis(100));
    check(&server, &origin);
    // End it: the session machine finishes and the runtime lets go of it (a machine still
    // running when the runtime is dropped would be reported as a leak).
    server.close(moq_net::Error::Cancel);
    drop((streams, kept, client));
    // The close waits at most a second for the transport to confirm.
    runtime.advance(Duration::from_millis(1500));
    assert!(server.is_closed(), "the session ends when asked");
    drop(track);
});

fn pick(streams: &mut [TestSendStream], which: u8) -> Option<&mut TestSendStream> {
    let len = streams.len();
    (len > 0).then(|| &mut streams[usize::from(which) % len])
}

/// The session's bounds hold.
fn check(server: &session::Session, origin: &Origin) {
    assert!(
        origin.broadcast_count() <= 1 + MAX_ANNOUNCES,
        "{} broadcasts",
        origin.broadcast_count()
    );
    let counters = server.counters();
    assert!(counters.subscriptions_active as usize <= MAX_REQUESTS);
}
