//! Requests beside SUBSCRIBE: SUBSCRIBE_UPDATE reprioritizing groups in flight, FETCH.

use std::time::Duration;

use bytes::Bytes;
use moqx_net::Error;
use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::runtime::test::{LinkConfig, TestRuntime};
use moqx_net::session::{self, SessionConfig};

use crate::common::relay::*;
use crate::common::seeded;

#[test]
fn subscribe_update_reprioritizes_groups_in_flight() {
    use moqx_net::coding::{Message, Subscribe, SubscribeUpdate, Version};
    use moqx_net::transport::{SendStream, Session as _};
    seeded(17, |runtime| {
        let mut relay = Relay::new();
        let (_p, _b, mut track) = publisher(runtime, &mut relay, "live", "video");
        let mut raw = raw_client(runtime, &mut relay);
        write_uni(&mut raw, SETUP);
        assert!(runtime.run_until(SECOND, || relay.origin.consume_broadcast("live").is_some()));

        // SUBSCRIBE at priority 1, on a bidi stream kept open for the update.
        let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
        let std::task::Poll::Ready(Ok((mut send, recv))) = raw.poll_open_bidi(&waiter) else {
            panic!("the test transport opens at once");
        };
        std::mem::forget(recv);
        let mut bytes = vec![0x02];
        Subscribe {
            id: 0,
            broadcast: moqx_net::model::Path::new("live"),
            track: "video".into(),
            priority: 1,
            ordered: false,
            max_latency: Duration::from_secs(5),
            start: None,
            end: None,
        }
        .encode(&mut bytes, Version::Lite05)
        .unwrap();
        let _ = send.poll_write(&waiter, &mut Bytes::from(bytes));
        assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));

        // The subscriber priority of the group streams in flight to the client (uni stream
        // ids have bit 1 set).
        let group_priority = |raw: &moqx_net::runtime::test::TestTransport| {
            raw.peer_priorities()
                .into_iter()
                .find(|(id, _)| id & 2 != 0)
                .map(|(_, priority)| priority.subscriber)
        };
        // A group stays open, so its stream to the client stays in flight.
        let mut group = track.append_group();
        group.write(0, "streaming");
        assert!(runtime.run_until(SECOND, || group_priority(&raw).is_some()));
        assert_eq!(
            group_priority(&raw),
            Some(1),
            "sent at the subscriber's priority"
        );

        let mut update = Vec::new();
        SubscribeUpdate {
            priority: 200,
            ordered: false,
            max_latency: Duration::from_secs(5),
            start: None,
            end: None,
        }
        .encode(&mut update, Version::Lite05)
        .unwrap();
        let _ = send.poll_write(&waiter, &mut Bytes::from(update));
        assert!(
            runtime.run_until(SECOND, || group_priority(&raw) == Some(200)),
            "the stream in flight takes the new priority"
        );
        group.finish();
    });
}

#[test]
fn fetch_returns_a_cached_group_and_not_found_for_one_that_is_gone() {
    use moqx_net::coding::{Fetch, GroupDecoder, GroupItem, Message, Version};
    use moqx_net::transport::{RecvStream, SendStream, Session as _};
    seeded(18, |runtime| {
        let origin = Origin::new();
        let broadcast = BroadcastProducer::new();
        let mut track = broadcast.create_track(Track::new("video"));
        origin.publish("live", &broadcast).unwrap();
        // The publisher itself is the raw client's peer: FETCH is served from its cache.
        let (raw_end, server_end) = runtime.connect(LinkConfig::default());
        let _server = session::accept(
            runtime.clone(),
            server_end,
            SessionConfig::default().with_publisher(&origin),
        );
        let mut raw = raw_end;
        write_uni(&mut raw, SETUP);
        let mut group = track.append_group();
        group.write(1000, "hello");
        group.write(1033, "world");
        group.finish();

        let fetch = |raw: &mut moqx_net::runtime::test::TestTransport, sequence: u64| {
            let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
            let std::task::Poll::Ready(Ok((mut send, recv))) = raw.poll_open_bidi(&waiter) else {
                panic!("the test transport opens at once");
            };
            let mut bytes = vec![0x03];
            Fetch {
                broadcast: moqx_net::model::Path::new("live"),
                track: "video".into(),
                priority: 0,
                group: sequence,
            }
            .encode(&mut bytes, Version::Lite05)
            .unwrap();
            let _ = send.poll_write(&waiter, &mut Bytes::from(bytes));
            let _ = send.finish();
            recv
        };
        let read_all = |runtime: &TestRuntime,
                        mut recv: moqx_net::runtime::test::TestRecvStream| {
            let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
            let mut bytes = Vec::new();
            let mut outcome = None;
            runtime.run_until(SECOND, || {
                loop {
                    match recv.poll_read(&waiter) {
                        std::task::Poll::Ready(Ok(Some(chunk))) => bytes.extend_from_slice(&chunk),
                        std::task::Poll::Ready(Ok(None)) => {
                            outcome = Some(Ok(()));
                            return true;
                        }
                        std::task::Poll::Ready(Err(error)) => {
                            outcome = Some(Err(error));
                            return true;
                        }
                        std::task::Poll::Pending => return false,
                    }
                }
            });
            (bytes, outcome)
        };

        let (body, outcome) = read_all(runtime, fetch(&mut raw, 0));
        assert_eq!(outcome, Some(Ok(())));
        // The reply is bare FRAMEs: decode them behind a synthetic GROUP header.
        let mut decoder = GroupDecoder::new(Version::Lite05, 1 << 20);
        decoder.push(&[0x02, 0x00, 0x00]);
        decoder.push(&body);
        let mut frames = Vec::new();
        while let Some(item) = decoder.next_item().unwrap() {
            if let GroupItem::Frame { timestamp, payload } = item {
                frames.push((timestamp, payload));
            }
        }
        assert_eq!(
            frames,
            [
                (Some(1000), Bytes::from("hello")),
                (Some(1033), Bytes::from("world"))
            ]
        );

        let (_, missing) = read_all(runtime, fetch(&mut raw, 7));
        assert_eq!(
            missing,
            Some(Err(moqx_net::transport::StreamError::Reset(
                Error::NotFound.to_code()
            )))
        );
    });
}
