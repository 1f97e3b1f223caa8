//! Hostile announcers: floods of announcements and announce streams, churn against a
//! listener that does not read, and paths that name one broadcast two ways.

use std::time::Duration;

use moq_conformance::hostile::{HostileClient, HostileConfig};
use moq_conformance::strict::wire::{Announce, AnnounceOk, AnnounceRequest, Lite};
use moqx_net::Error;
use moqx_net::model::{BroadcastProducer, Origin};
use moqx_net::session::SessionConfig;
use moqx_tokio::{ClientConfig, connect};

use super::bed::{Bed, PATIENCE, hostile};
use super::raw::{SETUP, announce_one};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announce_flood_closes_its_session_and_the_origin_stays_bounded() {
    let mut bed = Bed::start(|config| config.limits.max_announces_per_session = 50).await;
    let relay = bed.relay;
    let code = hostile(move || {
        let mut client = HostileClient::connect(relay, &HostileConfig::default());
        client.write(2, SETUP, true);
        // The relay asks for our announcements on its first bidi stream (id 1).
        let request = client.read(1, 3);
        assert_eq!(request.first(), Some(&0x01), "an ANNOUNCE_REQUEST stream");
        let mut answer = AnnounceOk {
            hop_id: 0,
            active_count: 0,
        }
        .encode();
        for i in 0..200 {
            answer.extend(
                Announce {
                    active: true,
                    suffix: format!("flood/{i}"),
                    hops: Vec::new(),
                }
                .encode(Lite::V05),
            );
        }
        client.write(1, &answer, false);
        client.closed_with(PATIENCE)
    })
    .await;
    assert_eq!(code, Some(Error::BoundsExceeded.to_code()));
    // The session's end withdrew what it published before its close went out.
    let broadcasts = bed.metric("broadcasts");
    assert!(
        broadcasts <= 1,
        "the flood's broadcasts left with it: {broadcasts}"
    );
    bed.delivers("after the announce flood").await;
}

/// Announce streams past `limits.max_announce_requests_per_session` are refused on their
/// own stream (BoundsExceeded), counted, and the session goes on: each one would be an
/// origin listener holding a queue of changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announce_streams_past_the_bound_are_reset_and_counted() {
    let mut bed = Bed::start(|config| config.limits.max_announce_requests_per_session = 4).await;
    let relay = bed.relay;
    let (codes, closed) = hostile(move || {
        let mut client = HostileClient::connect(relay, &HostileConfig::default());
        client.write(2, SETUP, true);
        // Ten ANNOUNCE_REQUESTs (type 1; length 2, empty prefix, no excluded hop).
        let streams: Vec<u64> = (0..10).map(|i| i * 4).collect();
        for &id in &streams {
            client.write(id, &[0x01, 0x02, 0x00, 0x00], false);
        }
        // The first four are served (and never reset); the rest are refused.
        let codes: Vec<Option<u64>> = streams[4..]
            .iter()
            .map(|&id| client.reset_code(id))
            .collect();
        (codes, client.closed_with(Duration::from_millis(200)))
    })
    .await;
    let refused = codes
        .iter()
        .filter(|code| **code == Some(Error::BoundsExceeded.to_code()))
        .count();
    assert_eq!(refused, 6, "{codes:?}");
    assert_eq!(closed, None, "the session goes on");
    assert_eq!(bed.metric("announce_requests_refused_total"), 6);
    bed.delivers("after the announce streams").await;
}

/// Growth (review finding F1): a listener that asks for every announcement and then gives
/// no credit, while a publisher announces and withdraws thousands of distinct names. The
/// changes waiting for listeners stay at what is live (they grew by one entry per name,
/// forever), and the good pair keeps delivering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announce_churn_against_a_stalled_listener_holds_only_what_is_live() {
    let mut bed = Bed::start(|_| {}).await;
    let relay = bed.relay;
    let stalled = hostile(move || {
        let mut client = HostileClient::connect(
            relay,
            &HostileConfig {
                window: 4096,
                ..HostileConfig::default()
            },
        );
        client.write(2, SETUP, true);
        let mut request = vec![0x01]; // an ANNOUNCE_REQUEST stream
        request.extend(
            AnnounceRequest {
                prefix: String::new(),
                exclude_hop: 0,
            }
            .encode(Lite::V05),
        );
        client.write(0, &request, false);
        client // and never reads again
    })
    .await;
    let published = Origin::new();
    let churner = bed
        .client(SessionConfig::default().with_publisher(&published))
        .await;
    for index in 0..3000 {
        let broadcast = BroadcastProducer::new();
        published
            .publish(format!("churn/{index}"), &broadcast)
            .unwrap();
        if index % 50 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(broadcast);
    }
    bed.delivers("after the churn").await;
    let listeners = bed.metric("announce_listeners");
    let waiting = bed
        .metric_once("announcements_waiting", |waiting| waiting <= 4 * listeners)
        .await;
    assert!(
        listeners >= 2,
        "the stalled listener and the good subscriber"
    );
    assert!(
        waiting <= 4 * listeners,
        "{waiting} changes wait for {listeners} listeners"
    );
    assert!(!churner.is_closed());
    drop(stalled);
}

/// Regression: raw QUIC took the SETUP path as it came, WebTransport through URL rules, so
/// one path named different broadcasts on each. A raw-QUIC publisher whose SETUP path is
/// `/lobby/./x/..` publishes under `lobby`, where a WebTransport subscriber of `/lobby`
/// finds its broadcast by its plain name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_path_names_the_same_broadcasts_on_both_bindings() {
    let bed = Bed::start(|_| {}).await;
    let relay = bed.relay;
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let publisher = tokio::task::spawn_blocking(move || {
        let mut client = HostileClient::connect(relay, &HostileConfig::default());
        // SETUP: one parameter, Path (2), "/lobby/./x/..".
        let path = b"/lobby/./x/..";
        let mut body = vec![0x01, 0x02, path.len() as u8];
        body.extend_from_slice(path);
        let mut setup = vec![0x01];
        setup.extend(moq_conformance::strict::wire::message(&body));
        announce_one(&mut client, &setup, "camera");
        client.drive(PATIENCE, |_| finished.try_recv().is_ok());
    });
    let seen = Origin::new();
    let _subscriber = connect(
        &format!("https://localhost:{}/lobby", relay.port()),
        ClientConfig::default()
            .with_session(SessionConfig::default().with_subscriber(&seen))
            .with_fingerprint(bed.fingerprint),
    )
    .await
    .unwrap();
    tokio::time::timeout(PATIENCE, async {
        while seen.consume_broadcast("camera").is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("announced as: {:?}", seen.paths("")));
    let _ = done.send(());
    publisher.await.unwrap();
}
