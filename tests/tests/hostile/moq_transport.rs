//! Hostile moq-transport peers (draft 16 over raw QUIC): a peer that runs past the request
//! ids it was granted, a flood of namespaces, a FETCH of every object there could be. Each
//! is answered as the draft says, what the relay holds stays within its bounds, and the
//! good pair keeps delivering.

use std::time::Duration;

use bytes::Bytes;
use moq_conformance::hostile::{HostileClient, HostileConfig};
use moqx_net::Error;
use moqx_net::moqt::{
    ClientSetup, Control, Draft, Fetch, FetchRange, Frame, Location, Namespace, PublishNamespace,
    RequestError, RequestOk, ServerSetup, SetupOptions, Subscribe,
};

use super::bed::{Bed, PATIENCE, hostile};

/// The draft these peers speak, and its ALPN.
const DRAFT: Draft = Draft::D16;

/// A raw draft-16 client past SETUP: the connection, and the request ids the relay
/// granted (its MAX_REQUEST_ID).
fn moqt_client(relay: std::net::SocketAddr) -> (HostileClient, Control16, u64) {
    let mut client = HostileClient::connect(
        relay,
        &HostileConfig {
            alpn: moqx_net::coding::Version::Moqt16.alpn().as_bytes().to_vec(),
            ..HostileConfig::default()
        },
    );
    let setup = ClientSetup {
        versions: Vec::new(),
        options: SetupOptions {
            max_request_id: Some(100),
            ..SetupOptions::default()
        },
    };
    let mut control = Control16::default();
    control.send(&mut client, &setup);
    let frame = control.next(&mut client).expect("the relay's SETUP");
    let setup = ServerSetup::from_frame(&frame, DRAFT).expect("a SERVER_SETUP");
    let granted = setup.options.max_request_id.unwrap_or(0);
    (client, control, granted)
}

/// Draft 16's control stream, the client's first bidirectional stream: what was sent,
/// and what came back and was not read yet.
#[derive(Default)]
struct Control16 {
    received: Vec<u8>,
}

impl Control16 {
    /// The control stream's id.
    const ID: u64 = 0;

    fn send(&mut self, client: &mut HostileClient, message: &impl Control) {
        client.write(Self::ID, &message.to_vec(DRAFT).unwrap(), false);
    }

    /// The next message the relay sent, once it came (within 10 s); `None` if it did not.
    fn next(&mut self, client: &mut HostileClient) -> Option<Frame> {
        loop {
            let mut buf = &self.received[..];
            if let Ok(frame) = Frame::decode(&mut buf, DRAFT) {
                let used = self.received.len() - buf.len();
                self.received.drain(..used);
                return Some(frame);
            }
            let more = client.read(Self::ID, 1);
            if more.is_empty() {
                return None;
            }
            self.received.extend(more);
        }
    }
}

/// A request past the ids the relay granted is TOO_MANY_REQUESTS, fatal to the session
/// (requests that stay open hold their ids: subscriptions to the good track).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_past_the_granted_ids_close_the_session_and_the_relay_goes_on() {
    let mut bed = Bed::start(|_| {}).await;
    let relay = bed.relay;
    let (code, granted) = hostile(move || {
        let (mut client, mut control, granted) = moqt_client(relay);
        let mut id = 0;
        while id <= granted {
            let subscribe = Subscribe {
                request_id: id,
                namespace: Namespace::from_strs(["good"]),
                name: Bytes::from_static(b"chat"),
                ..Subscribe::default()
            };
            control.send(&mut client, &subscribe);
            id += 2;
        }
        (client.closed_with(PATIENCE), granted)
    })
    .await;
    assert!(granted > 0, "the relay granted request ids");
    assert_eq!(
        code,
        Some(Error::TooManyRequests.to_termination(DRAFT).code()),
        "closed with TOO_MANY_REQUESTS"
    );
    bed.delivers("after the request-id exhaustion").await;
}

/// Namespaces past `limits.max_announces_per_session` are refused one by one
/// (REQUEST_ERROR), the session goes on, and the origin holds only what was accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_flood_is_refused_past_the_bound_and_the_origin_stays_bounded() {
    const BOUND: u64 = 5;
    const FLOOD: u64 = 20;
    let mut bed =
        Bed::start(|config| config.limits.max_announces_per_session = BOUND as usize).await;
    let relay = bed.relay;
    let (accepted, refused, closed) = hostile(move || {
        let (mut client, mut control, granted) = moqt_client(relay);
        let flood = FLOOD.min(granted / 2);
        for index in 0..flood {
            let publish = PublishNamespace {
                request_id: index * 2,
                namespace: Namespace::from_strs(["flood", &index.to_string()]),
                ..PublishNamespace::default()
            };
            control.send(&mut client, &publish);
        }
        let (mut accepted, mut refused) = (0, 0);
        while accepted + refused < flood {
            let Some(frame) = control.next(&mut client) else {
                break;
            };
            if RequestOk::from_frame(&frame, DRAFT).is_ok() {
                accepted += 1;
            } else if RequestError::from_frame(&frame, DRAFT).is_ok() {
                refused += 1;
            }
        }
        (
            accepted,
            refused,
            client.closed_with(Duration::from_millis(200)),
        )
    })
    .await;
    assert_eq!(accepted, BOUND, "accepted up to the bound");
    assert_eq!(refused, FLOOD - BOUND, "refused past it");
    assert_eq!(closed, None, "the session goes on");
    let broadcasts = bed.metric("broadcasts");
    assert!(
        broadcasts <= BOUND + 1,
        "the origin holds what was accepted and the good broadcast: {broadcasts}"
    );
    bed.delivers("after the namespace flood").await;
}

/// A FETCH of every object a track could hold is refused (the relay serves no FETCH yet)
/// on its own, and the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_of_every_object_is_refused_alone() {
    let mut bed = Bed::start(|_| {}).await;
    let relay = bed.relay;
    let (answer, closed) = hostile(move || {
        let (mut client, mut control, _) = moqt_client(relay);
        let fetch = Fetch {
            request_id: 0,
            range: FetchRange::Standalone {
                namespace: Namespace::from_strs(["good"]),
                name: Bytes::from_static(b"chat"),
                start: Location::default(),
                end: Location {
                    group: (1 << 62) - 1,
                    object: (1 << 62) - 1,
                },
            },
            parameters: Default::default(),
        };
        control.send(&mut client, &fetch);
        let answer = control
            .next(&mut client)
            .and_then(|frame| RequestError::from_frame(&frame, DRAFT).ok());
        (answer, client.closed_with(Duration::from_millis(200)))
    })
    .await;
    let answer = answer.expect("a REQUEST_ERROR");
    assert_eq!(answer.request_id, Some(0));
    assert_eq!(closed, None, "the session goes on");
    bed.delivers("after the fetch").await;
}
