// The hostile-peer suite's tests, included by one test file per relay driver (each
// defines `DRIVER` first): `hostile_peers.rs` (tokio work-stealing),
// `hostile_peers_per_core.rs` (tokio thread per core), `hostile_peers_uring.rs`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moq_conformance::hostile::{HostileClient, HostileConfig};
use moq_conformance::strict::wire::{Announce, AnnounceOk, AnnounceRequest, Lite, Subscribe};
use moq_net::Error;
use moq_net::model::{BroadcastProducer, Origin, Track, TrackProducer};
use moq_net::session::{Session, SessionConfig};
use moq_relay::{Config, Relay};
use moq_tokio::{ClientConfig, connect};

/// A bound on every wait, so that a broken relay fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(20);

/// The relay and its good publisher and subscriber.
struct Bed {
    relay: SocketAddr,
    fingerprint: moq_runtime::tls::Fingerprint,
    http: SocketAddr,
    track: TrackProducer,
    received: Arc<Mutex<Vec<String>>>,
    _sessions: (Session, Session),
    _broadcast: BroadcastProducer,
}

impl Bed {
    async fn start(edit: impl FnOnce(&mut Config)) -> Self {
        let mut config = Config::default();
        config.server.bind = "127.0.0.1:0".parse().unwrap();
        config.http.bind = Some("127.0.0.1:0".parse().unwrap());
        // The driver this copy of the suite runs on; two workers where there are workers,
        // so that connections land on both.
        config.server.driver = DRIVER;
        config.server.workers = 2;
        edit(&mut config);
        let relay = Relay::bind(&config).await.unwrap();
        let (address, http, fingerprint) = (
            relay.local_addr(),
            relay.http_addr().unwrap(),
            relay.fingerprint(),
        );
        tokio::spawn(relay.run(std::future::pending()));
        let client = |session| ClientConfig {
            session,
            fingerprint: Some(fingerprint),
            ..ClientConfig::default()
        };
        let url = format!("moqt://localhost:{}/", address.port());

        let published = Origin::new();
        let broadcast = BroadcastProducer::new();
        let track = broadcast.create_track(Track::new("chat"));
        published.publish("good", &broadcast).unwrap();
        let publisher = connect(
            &url,
            client(SessionConfig {
                publish: Some(published),
                ..SessionConfig::default()
            }),
        )
        .await
        .unwrap();
        let seen = Origin::new();
        let subscriber = connect(
            &url,
            client(SessionConfig {
                subscribe: Some(seen.clone()),
                ..SessionConfig::default()
            }),
        )
        .await
        .unwrap();
        let received = read_chat(&seen, "good").await;
        let mut bed = Self {
            relay: address,
            fingerprint,
            http,
            track,
            received,
            _sessions: (publisher, subscriber),
            _broadcast: broadcast,
        };
        tokio::time::timeout(PATIENCE, async {
            while bed.track.consumer_count() == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the good subscription reaches the publisher");
        bed.delivers("ready").await;
        bed
    }

    /// Publishes `text` as a one-frame group and waits until the good subscriber has it.
    async fn delivers(&mut self, text: &str) {
        let mut group = self.track.append_group();
        group.write(0, text.to_owned());
        group.finish();
        let received = self.received.clone();
        let text = text.to_owned();
        tokio::time::timeout(PATIENCE, async move {
            while !received.lock().unwrap().contains(&text) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the good subscriber keeps receiving");
    }

    /// The relay's `/metrics` text.
    fn metrics_text(&self) -> String {
        let mut stream = TcpStream::connect(self.http).unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text
    }

    /// A good client of the relay, configured with `session`.
    async fn client(&self, session: SessionConfig) -> Session {
        let url = format!("moqt://localhost:{}/", self.relay.port());
        connect(
            &url,
            ClientConfig {
                session,
                fingerprint: Some(self.fingerprint),
                ..ClientConfig::default()
            },
        )
        .await
        .expect("a good client connects")
    }

    /// A sample of the relay's `/metrics` (0 when absent).
    fn metric(&self, name: &str) -> u64 {
        self.metrics_text()
            .lines()
            .find_map(|line| line.strip_prefix(&format!("moq_relay_{name} ")))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0)
    }

    /// The relay's metric `name` once `reached` holds of it, or as it is after the
    /// patience: a metric the relay updates on another task may lag what a test saw.
    async fn metric_once(&self, name: &str, reached: impl Fn(u64) -> bool) -> u64 {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let value = self.metric(name);
            if reached(value) || tokio::time::Instant::now() >= deadline {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Runs the hostile part of a test on a blocking thread.
async fn hostile<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work).await.unwrap()
}

/// The minimal client SETUP on its uni stream: type 1, length 1, no parameters.
const SETUP: &[u8] = &[0x01, 0x01, 0x00];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_setup_closes_its_connection_and_the_relay_carries_on() {
    let mut bed = Bed::start(|_| {}).await;
    let relay = bed.relay;
    let code = hostile(move || {
        let mut client = HostileClient::connect(relay, &HostileConfig::default());
        // A SETUP claiming 1 GiB, then zeros past the SETUP limit.
        let mut setup = vec![0x01, 0xc0, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00];
        setup.resize(setup.len() + (32 << 10), 0);
        client.write(2, &setup, false);
        client.closed_with(PATIENCE)
    })
    .await;
    assert_eq!(code, Some(Error::BoundsExceeded.to_code()));
    bed.delivers("after the oversized setup").await;
}

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

/// Regression: a subscriber that gives no stream credit (MAX_STREAMS_UNI never raised)
/// made the relay queue every group it was sent. The oldest waiting groups are dropped,
/// counted, and the others keep delivering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_withholding_stream_credit_loses_groups_and_others_do_not() {
    // Two uni streams in all: the relay's SETUP and one group.
    stingy_subscriber(HostileConfig {
        max_streams_uni: 2,
        ..HostileConfig::default()
    })
    .await;
}

/// Review finding: a subscriber that lets group streams open but gives them no data
/// credit kept every group alive in its unfinished stream. Past
/// `max_queued_groups_per_session` open groups, the oldest is reset (Lagged), counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_withholding_data_credit_loses_groups_and_others_do_not() {
    // Streams aplenty, and not a byte of data credit.
    stingy_subscriber(HostileConfig {
        max_streams_uni: 1000,
        window: 0,
        ..HostileConfig::default()
    })
    .await;
}

/// A subscriber of the good track whose transport is `config` and which never reads,
/// while 200 messages are delivered to the good subscriber: at most
/// `max_queued_groups_per_session` (16) of its groups may be kept, the rest are dropped.
async fn stingy_subscriber(config: HostileConfig) {
    let mut bed = Bed::start(|config| config.limits.max_queued_groups_per_session = 16).await;
    let relay = bed.relay;
    let served = bed.metric("subscriptions_total");
    let (subscribed_tx, subscribed_rx) = tokio::sync::oneshot::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    // Spawned now (not awaited): it runs beside the publishing below.
    let stingy = tokio::task::spawn_blocking(move || {
        let mut client = HostileClient::connect(relay, &config);
        client.write(2, SETUP, true);
        let mut subscribe = vec![0x02];
        subscribe.extend(
            Subscribe {
                id: 0,
                broadcast: "good".into(),
                track: "chat".into(),
                priority: 0,
                ordered: 0,
                max_latency: 0,
                start: 0,
                end: 0,
            }
            .encode(),
        );
        client.write(0, &subscribe, false);
        client.drive(Duration::from_millis(100), |_| false);
        let _ = subscribed_tx.send(());
        // Keep the connection alive (acknowledging, never reading) until the test is done.
        client.drive(PATIENCE * 2, |_| done_rx.try_recv().is_ok());
        client
    });
    // Awaited, not blocked on: a blocked worker would stall the relay's tasks.
    tokio::time::timeout(PATIENCE, subscribed_rx)
        .await
        .expect("the stingy subscriber subscribed")
        .unwrap();
    // Taken by the relay (with no credit, the subscriber cannot read its answer).
    let now_served = bed
        .metric_once("subscriptions_total", |now| now > served)
        .await;
    assert!(now_served > served, "the relay never took the subscription");
    for i in 0..200 {
        bed.delivers(&format!("message {i}")).await;
    }
    let bound = 200 - 2 * 16 - 2;
    let dropped = bed
        .metric_once("groups_dropped_total", |dropped| dropped >= bound)
        .await;
    done_tx.send(()).unwrap();
    drop(stingy.await.unwrap());
    assert!(
        dropped >= bound,
        "the stingy subscriber's oldest groups were dropped: {dropped}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_send_setup_are_closed_with_timeout() {
    let mut bed = Bed::start(|config| config.limits.setup_timeout_secs = 1).await;
    let relay = bed.relay;
    let codes = hostile(move || {
        let mut clients: Vec<HostileClient> = (0..20)
            .map(|_| HostileClient::connect(relay, &HostileConfig::default()))
            .collect();
        clients
            .iter_mut()
            .map(|client| client.closed_with(PATIENCE))
            .collect::<Vec<_>>()
    })
    .await;
    assert!(
        codes
            .iter()
            .all(|code| *code == Some(Error::Timeout.to_code())),
        "{codes:?}"
    );
    assert_eq!(bed.metric("sessions"), 2, "only the good pair holds a slot");
    bed.delivers("after the silent connections").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_flood_does_not_keep_new_clients_out() {
    let mut bed = Bed::start(|config| {
        config.limits.max_half_open = 16;
        config.limits.retry_above_half_open = 4;
    })
    .await;
    let relay = bed.relay;
    // A hundred handshakes started and never continued (each its own socket and address
    // port), holding whatever the relay gives them.
    let flood = hostile(move || {
        (0..100)
            .map(|_| HostileClient::start(relay, &HostileConfig::default()))
            .collect::<Vec<_>>()
    })
    .await;
    // A new client still gets in (through a Retry) and is served.
    let code = hostile(move || {
        let mut client = HostileClient::connect(relay, &HostileConfig::default());
        client.write(2, SETUP, true);
        client.closed_with(Duration::from_secs(1))
    })
    .await;
    assert_eq!(code, None, "the new client is let in and stays");
    bed.delivers("after the handshake flood").await;
    drop(flood);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_flooding_quic_datagrams_that_nobody_reads_is_not_closed_and_not_kept() {
    let mut bed = Bed::start(|_| {}).await;
    let relay = bed.relay;
    let code = hostile(move || {
        let mut client = HostileClient::connect(relay, &HostileConfig::default());
        client.write(2, SETUP, true);
        for i in 0..20_000u32 {
            client.send_datagram(&i.to_be_bytes().repeat(64));
            if i % 256 == 0 {
                client.drive(Duration::from_millis(1), |_| false);
            }
        }
        client.closed_with(Duration::from_secs(1))
    })
    .await;
    assert_eq!(code, None, "datagrams are not an error");
    bed.delivers("after the datagram flood").await;
}

/// A hostile publisher: announces `evil` (one track `chat`) and answers the relay's TRACK
/// and SUBSCRIBE; returns the subscription's id once the relay subscribed.
fn evil_publisher(client: &mut HostileClient) -> u64 {
    announce_one(client, SETUP, "evil");
    answer_subscription(client)
}

/// Sends `setup` (a whole SETUP stream) and announces `suffix` on the relay's announce
/// request.
fn announce_one(client: &mut HostileClient, setup: &[u8], suffix: &str) {
    let stream = client.open_uni();
    client.write(stream, setup, true);
    let announce = client
        .next_server_stream(1, &[])
        .expect("an ANNOUNCE_REQUEST");
    client.read(announce, 3);
    let mut answer = AnnounceOk {
        hop_id: 0,
        active_count: 1,
    }
    .encode();
    answer.extend(
        Announce {
            active: true,
            suffix: suffix.into(),
            hops: Vec::new(),
        }
        .encode(Lite::V05),
    );
    client.write(announce, &answer, false);
}

/// Answers the relay's TRACK and SUBSCRIBE for the one track; returns the subscription id.
fn answer_subscription(client: &mut HostileClient) -> u64 {
    // The relay's first bidi stream (id 1) is its announce request.
    let announce = 1;
    // TRACK: answered with TRACK_INFO (priority 0, unordered, 5 s, timescale 1000), FIN.
    let track = client
        .next_server_stream(1, &[announce])
        .expect("a TRACK request");
    client.read(track, 4);
    client.write(track, &[0x06, 0x00, 0x00, 0x53, 0x88, 0x43, 0xe8], true);
    // SUBSCRIBE: type 2, then its length and its id.
    let subscribe = client
        .next_server_stream(1, &[announce, track])
        .expect("a SUBSCRIBE");
    let request = client.read(subscribe, 4);
    assert_eq!(request.first(), Some(&0x02), "a subscribe stream");
    let mut body = &request[1..];
    let _length = moq_conformance::strict::wire::read_varint(&mut body).unwrap();
    moq_conformance::strict::wire::read_varint(&mut body).unwrap()
}

/// A group stream's opening: stream type 0, then GROUP (subscribe id, sequence).
fn group_header(subscribe: u64, sequence: u64) -> Vec<u8> {
    let mut body = Vec::new();
    moq_conformance::strict::wire::write_varint(&mut body, subscribe);
    moq_conformance::strict::wire::write_varint(&mut body, sequence);
    let mut header = vec![0x00];
    header.extend(moq_conformance::strict::wire::message(&body));
    header
}

/// One FRAME: timestamp delta 0, the payload's size, the payload.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0x00];
    moq_conformance::strict::wire::write_varint(&mut out, payload.len() as u64);
    out.extend_from_slice(payload);
    out
}

/// A good subscriber of the hostile publisher's `evil`/`chat`: its session and what it
/// received.
async fn evil_reader(bed: &Bed) -> (Session, Arc<Mutex<Vec<String>>>) {
    let seen = Origin::new();
    let subscriber = connect(
        &format!("moqt://localhost:{}/", bed.relay.port()),
        ClientConfig {
            session: SessionConfig {
                subscribe: Some(seen.clone()),
                ..SessionConfig::default()
            },
            fingerprint: Some(bed.fingerprint),
            ..ClientConfig::default()
        },
    )
    .await
    .unwrap();
    let received = read_chat(&seen, "evil").await;
    (subscriber, received)
}

/// Waits until `path` is announced in `seen`, then reads its `chat` track in a task:
/// every frame, as text, in what it returns.
async fn read_chat(seen: &Origin, path: &str) -> Arc<Mutex<Vec<String>>> {
    let broadcast = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Some(broadcast) = seen.consume_broadcast(path) {
                return broadcast;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{path} is announced"));
    let received = Arc::new(Mutex::new(Vec::new()));
    let sink = received.clone();
    tokio::spawn(async move {
        let Ok(mut track) = broadcast.subscribe_track("chat").await else {
            return;
        };
        while let Ok(Some(mut group)) = track.next_group().await {
            while let Ok(Some(frame)) = group.read_frame().await {
                let text = String::from_utf8_lossy(&frame.payload).into_owned();
                sink.lock().unwrap().push(text);
            }
        }
    });
    received
}

async fn until_received(received: &Arc<Mutex<Vec<String>>>, text: &str) {
    let received = received.clone();
    let text = text.to_owned();
    tokio::time::timeout(PATIENCE, async move {
        while !received.lock().unwrap().contains(&text) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the subscriber receives it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_at_the_largest_sequence_is_refused_alone() {
    let mut bed = Bed::start(|_| {}).await;
    let relay = bed.relay;
    let (to_test, mut from_hostile) = tokio::sync::mpsc::unbounded_channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let publisher = tokio::task::spawn_blocking(move || {
        let mut client = HostileClient::connect(relay, &HostileConfig::default());
        let subscribe = evil_publisher(&mut client);
        // The largest sequence there is: SUBSCRIBE_END could not say what follows it.
        let last = client.open_uni();
        let mut group = group_header(subscribe, (1 << 62) - 1);
        group.extend(frame(b"the last sequence"));
        client.write(last, &group, true);
        client.drive(Duration::from_millis(300), |_| false);
        let _ = to_test.send(());
        client.drive(PATIENCE, |_| go_rx.try_recv().is_ok());
        // Then an ordinary group.
        let next = client.open_uni();
        let mut group = group_header(subscribe, 1);
        group.extend(frame(b"an ordinary group"));
        client.write(next, &group, true);
        client.closed_with(Duration::from_secs(2))
    });
    let (subscriber, received) = evil_reader(&bed).await;
    tokio::time::timeout(PATIENCE, from_hostile.recv())
        .await
        .expect("the hostile group went out");
    go_tx.send(()).unwrap();
    until_received(&received, "an ordinary group").await;
    assert!(
        !received
            .lock()
            .unwrap()
            .contains(&"the last sequence".to_owned()),
        "the group at the largest sequence was refused"
    );
    assert_eq!(
        publisher.await.unwrap(),
        None,
        "the publisher is not closed for it"
    );
    assert!(!subscriber.is_closed(), "nor is its subscriber");
    bed.delivers("after the largest sequence").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_group_is_refused_past_its_bound_and_the_next_one_flows() {
    let mut bed = Bed::start(|config| config.limits.max_group_frames = 8).await;
    let relay = bed.relay;
    let (to_test, mut from_hostile) = tokio::sync::mpsc::unbounded_channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let publisher = tokio::task::spawn_blocking(move || {
        let mut client = HostileClient::connect(relay, &HostileConfig::default());
        let subscribe = evil_publisher(&mut client);
        // A group that never ends: 100 frames, no FIN.
        let endless = client.open_uni();
        let mut group = group_header(subscribe, 0);
        for i in 0..100 {
            group.extend(frame(format!("endless {i}").as_bytes()));
        }
        client.write(endless, &group, false);
        client.drive(Duration::from_millis(300), |_| false);
        let _ = to_test.send(());
        client.drive(PATIENCE, |_| go_rx.try_recv().is_ok());
        let next = client.open_uni();
        let mut group = group_header(subscribe, 1);
        group.extend(frame(b"the next group"));
        client.write(next, &group, true);
        client.closed_with(Duration::from_secs(2))
    });
    let (subscriber, received) = evil_reader(&bed).await;
    tokio::time::timeout(PATIENCE, from_hostile.recv())
        .await
        .expect("the endless group went out");
    go_tx.send(()).unwrap();
    until_received(&received, "the next group").await;
    let endless = received
        .lock()
        .unwrap()
        .iter()
        .filter(|text| text.starts_with("endless"))
        .count();
    assert!(
        endless <= 8,
        "at most the bound's frames of the endless group: {endless}"
    );
    assert_eq!(
        bed.metric_once("groups_refused_total", |refused| refused >= 1)
            .await,
        1
    );
    assert_eq!(
        publisher.await.unwrap(),
        None,
        "the publisher is not closed for it"
    );
    assert!(!subscriber.is_closed());
    bed.delivers("after the endless group").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_closing_with_every_code_add_no_metric_labels() {
    let mut bed = Bed::start(|_| {}).await;
    let relay = bed.relay;
    hostile(move || {
        for code in (0..60u64).map(|i| i * 7919 + 3) {
            let mut client = HostileClient::connect(relay, &HostileConfig::default());
            client.write(2, SETUP, true);
            client.drive(Duration::from_millis(20), |_| false);
            let _ = client.connection().close(true, code, b"a code of its own");
            client.drive(Duration::from_millis(20), |conn| conn.is_closed());
        }
    })
    .await;
    // Wait until the relay has counted them all, then count the label set.
    let text = tokio::time::timeout(PATIENCE, async {
        loop {
            let text = bed.metrics_text();
            let closed: u64 = samples(&text, "moq_relay_sessions_closed_total")
                .map(|(_, value)| value)
                .sum();
            if closed >= 60 {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the relay counts every closed session");
    let labels = samples(&text, "moq_relay_sessions_closed_total").count();
    assert!(
        labels <= 3,
        "a bounded label set, not one per code: {labels}"
    );
    bed.delivers("after the codes").await;
}

/// The samples of metric `name` in a Prometheus text: (labels, value).
fn samples<'a>(text: &'a str, name: &'a str) -> impl Iterator<Item = (&'a str, u64)> + 'a {
    text.lines()
        .filter_map(move |line| line.strip_prefix(name))
        .filter_map(|rest| {
            let (labels, value) = rest.rsplit_once(' ')?;
            Some((labels, value.trim().parse().ok()?))
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_waiting_for_setup_do_not_take_established_sessions_places() {
    let mut bed = Bed::start(|config| {
        config.limits.max_sessions = 3;
        config.limits.max_pending_setup = 5;
        config.limits.setup_timeout_secs = 3600;
    })
    .await;
    let relay = bed.relay;
    let (silent, refused) = hostile(move || {
        let silent: Vec<HostileClient> = (0..5)
            .map(|_| HostileClient::connect(relay, &HostileConfig::default()))
            .collect();
        let mut sixth = HostileClient::connect(relay, &HostileConfig::default());
        (silent, sixth.closed_with(PATIENCE))
    })
    .await;
    assert_eq!(
        refused,
        Some(Error::BoundsExceeded.to_code()),
        "past max_pending_setup"
    );
    assert_eq!(bed.metric("sessions_pending_setup"), 5);
    assert_eq!(
        bed.metric("sessions"),
        2,
        "waiting connections are not sessions"
    );
    // One silent connection leaves: four wait for their SETUP and two sessions are
    // established; a third client that says who it is gets the third place.
    let mut silent = silent;
    let mut leaving = silent.pop().unwrap();
    hostile(move || {
        let _ = leaving.connection().close(true, 0, b"");
        leaving.drive(Duration::from_millis(50), |conn| conn.is_closed());
    })
    .await;
    tokio::time::timeout(PATIENCE, async {
        while bed.metric("sessions_pending_setup") != 4 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the relay counts the leaving connection out");
    let seen = Origin::new();
    let third = connect(
        &format!("moqt://localhost:{}/", relay.port()),
        ClientConfig {
            session: SessionConfig {
                subscribe: Some(seen.clone()),
                ..SessionConfig::default()
            },
            fingerprint: Some(bed.fingerprint),
            ..ClientConfig::default()
        },
    )
    .await
    .unwrap();
    tokio::time::timeout(PATIENCE, third.established())
        .await
        .expect("within the patience")
        .expect("the third client is let in");
    assert_eq!(bed.metric("sessions"), 3);
    bed.delivers("with connections waiting").await;
    drop(silent);
}

/// Regression: a token was checked only at connect, so a short-lived token held its session
/// forever. A session whose token runs out while it is connected is closed with
/// Unauthorized, on both bindings; the good pair (on a public prefix) goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_closed_when_its_token_expires() {
    use moq_relay::auth::{Claims, Key, KeyAlgorithm};
    let scratch = tempfile::tempdir().unwrap();
    let key = Key::generate(KeyAlgorithm::Hs256).unwrap();
    let key_file = scratch.path().join("root.jwk");
    std::fs::write(&key_file, key.to_json()).unwrap();
    let mut bed = Bed::start(|config| {
        config.auth.key = Some(key_file.clone());
        config.auth.public = Some(vec![String::new()]);
    })
    .await;
    for scheme in ["moqt", "https"] {
        // Expired 45 s ago: within the relay's 60 s of leeway for 15 more seconds, time
        // to connect on a busy machine, and closed well within the patience after.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let token = key
            .sign(&Claims {
                root: "private".into(),
                publish: vec![String::new()],
                subscribe: vec![String::new()],
                expires: Some(now - 45),
                issued: Some(now - 120),
                not_before: None,
            })
            .unwrap();
        let session = connect(
            &format!(
                "{scheme}://localhost:{}/private?jwt={token}",
                bed.relay.port()
            ),
            ClientConfig {
                session: SessionConfig {
                    subscribe: Some(Origin::new()),
                    ..SessionConfig::default()
                },
                fingerprint: Some(bed.fingerprint),
                ..ClientConfig::default()
            },
        )
        .await
        .unwrap();
        tokio::time::timeout(PATIENCE, session.established())
            .await
            .expect("within the patience")
            .unwrap_or_else(|error| panic!("{scheme}: let in while its token is valid: {error}"));
        let ended = tokio::time::timeout(PATIENCE, session.closed())
            .await
            .unwrap_or_else(|_| panic!("{scheme}: still open after its token expired"));
        assert_eq!(ended, Error::Unauthorized, "{scheme}");
    }
    bed.delivers("after the expiries").await;
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
        ClientConfig {
            session: SessionConfig {
                subscribe: Some(seen.clone()),
                ..SessionConfig::default()
            },
            fingerprint: Some(bed.fingerprint),
            ..ClientConfig::default()
        },
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

/// WebTransport connections that never send their CONNECT are bounded like raw-QUIC ones
/// that never send SETUP: past `limits.max_pending_setup` the next is refused with
/// H3_REQUEST_REJECTED (review finding: they were counted nowhere but the endpoint's table).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webtransport_connections_waiting_for_connect_are_bounded() {
    let mut bed = Bed::start(|config| config.limits.max_pending_setup = 3).await;
    let relay = bed.relay;
    let (held, refused) = hostile(move || {
        let h3 = HostileConfig {
            alpn: b"h3".to_vec(),
            ..HostileConfig::default()
        };
        let held: Vec<HostileClient> = (0..3).map(|_| HostileClient::connect(relay, &h3)).collect();
        let mut fourth = HostileClient::connect(relay, &h3);
        (held, fourth.closed_with(PATIENCE))
    })
    .await;
    assert_eq!(refused, Some(0x10b), "H3_REQUEST_REJECTED");
    bed.delivers("with handshakes waiting").await;
    drop(held);
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

/// Found by this suite: a good pair quiet for longer than the relay's idle timeout was
/// closed by it (nothing kept a quiet session alive). Clients now send a keep-alive PING
/// after a third of the negotiated idle timeout without sending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_pair_outlives_the_relays_idle_timeout() {
    let mut bed = Bed::start(|config| config.limits.idle_timeout_secs = 6).await;
    tokio::time::sleep(Duration::from_secs(15)).await;
    bed.delivers("after a quiet spell").await;
}

/// Regression: a CLOSE_WEBTRANSPORT_SESSION capsule shorter than its 4-byte code read as
/// "need more bytes" forever, while DATA kept being appended. Over a real HTTP/3 CONNECT,
/// the relay now closes that connection as malformed (H3_MESSAGE_ERROR).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_webtransport_close_capsule_closes_its_connection() {
    let mut bed = Bed::start(|_| {}).await;
    let relay = bed.relay;
    let code = hostile(move || {
        let h3 = HostileConfig {
            alpn: b"h3".to_vec(),
            ..HostileConfig::default()
        };
        let mut client = HostileClient::connect(relay, &h3);
        // Our control stream with SETTINGS (WebTransport enabled); it stays open.
        let mut settings = web_transport_proto::Settings::default();
        settings.enable_webtransport(1);
        let mut control = Vec::new();
        settings.encode(&mut control);
        client.write(2, &control, false);
        // The extended CONNECT on the first bidi stream.
        let url = url::Url::parse(&format!("https://localhost:{}/", relay.port())).unwrap();
        let mut connect = Vec::new();
        web_transport_proto::ConnectRequest::new(url)
            .with_protocols(["moq-lite-05".to_owned()])
            .encode(&mut connect)
            .unwrap();
        client.write(0, &connect, false);
        let response = client.read(0, 8);
        let response = web_transport_proto::ConnectResponse::decode(&mut &response[..])
            .expect("a CONNECT response");
        assert_eq!(response.status, web_transport_proto::http::StatusCode::OK);
        // DATA carrying a CLOSE_WEBTRANSPORT_SESSION capsule (0x2843) of 2 bytes: too
        // short for its 4-byte code.
        let capsule = [0x68, 0x43, 0x02, 0x00, 0x01];
        let mut data = vec![0x00, capsule.len() as u8];
        data.extend_from_slice(&capsule);
        client.write(0, &data, false);
        client.closed_with(PATIENCE)
    })
    .await;
    assert_eq!(code, Some(0x10e), "H3_MESSAGE_ERROR");
    bed.delivers("after the short capsule").await;
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
        .client(SessionConfig {
            publish: Some(published.clone()),
            ..SessionConfig::default()
        })
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
    assert!(listeners >= 2, "the stalled listener and the good subscriber");
    assert!(
        waiting <= 4 * listeners,
        "{waiting} changes wait for {listeners} listeners"
    );
    assert!(!churner.is_closed());
    drop(stalled);
}

/// Growth (review finding F13): against a relay-wide budget of 8 MiB, a publisher sends 40
/// tracks 12 groups of 64 KiB each (30 MiB, all of it cached without the budget) that one
/// subscriber reads. The accounted bytes never pass the budget, caches are shed first, every
/// group is delivered or counted where it was lost, and the good pair keeps delivering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_times_tracks_stay_within_the_relays_memory_budget() {
    let mut bed = Bed::start(|config| config.limits.max_memory_bytes = Some(8 << 20)).await;
    let published = Origin::new();
    let broadcast = BroadcastProducer::new();
    let mut tracks: Vec<TrackProducer> = (0..40)
        .map(|index| broadcast.create_track(Track::new(format!("t{index}"))))
        .collect();
    published.publish("bulk", &broadcast).unwrap();
    let publisher = bed
        .client(SessionConfig {
            publish: Some(published),
            ..SessionConfig::default()
        })
        .await;
    let seen = Origin::new();
    let _subscriber = bed
        .client(SessionConfig {
            subscribe: Some(seen.clone()),
            ..SessionConfig::default()
        })
        .await;
    let bulk = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Some(bulk) = seen.consume_broadcast("bulk") {
                return bulk;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("announced");
    // What the subscriber read, and the groups its own cache released before it read them.
    let frames = Arc::new(AtomicU64::new(0));
    let lagged = Arc::new(AtomicU64::new(0));
    for index in 0..40 {
        let (bulk, frames, lagged) = (bulk.clone(), frames.clone(), lagged.clone());
        tokio::spawn(async move {
            let Ok(mut track) = bulk.subscribe_track(&format!("t{index}")).await else {
                return;
            };
            let mut seen_lag = 0;
            while let Ok(Some(mut group)) = track.next_group().await {
                lagged.fetch_add(track.lagged() - seen_lag, Ordering::Relaxed);
                seen_lag = track.lagged();
                while let Ok(Some(_)) = group.read_frame().await {
                    frames.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    tokio::time::timeout(PATIENCE, async {
        while tracks.iter().any(|track| track.consumer_count() == 0) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("every track is subscribed");
    let payload = bytes::Bytes::from(vec![7u8; 64 << 10]);
    const ROUNDS: u64 = 12;
    for round in 0..ROUNDS {
        for track in &mut tracks {
            let mut group = track.append_group();
            group.write(round, payload.clone());
            group.finish();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Every frame (one a group) reached the subscriber or was counted where it was lost:
    // refused at the budget; dropped or skipped by the publisher or the relay for a peer
    // that did not keep up (on a busy machine); released by the subscriber's own cache.
    let all = 40 * ROUNDS;
    let accounted = |bed: &Bed| {
        let sent = publisher.counters();
        [
            ("delivered", frames.load(Ordering::Relaxed)),
            ("lagged", lagged.load(Ordering::Relaxed)),
            ("refused", bed.metric("memory_frames_refused_total")),
            ("relay dropped", bed.metric("groups_dropped_total")),
            ("relay skipped", bed.metric("groups_skipped_total")),
            ("publisher dropped", sent.groups_dropped),
            ("publisher skipped", sent.groups_skipped),
        ]
    };
    // A slow machine takes longer, so only a wait without progress fails.
    let total = |bed: &Bed| accounted(bed).iter().map(|(_, count)| count).sum::<u64>();
    let mut progress = (0, tokio::time::Instant::now());
    while total(&bed) < all {
        let now = total(&bed);
        if now > progress.0 {
            progress = (now, tokio::time::Instant::now());
        }
        assert!(
            progress.1.elapsed() < PATIENCE,
            "the bulk arrived or was counted: {:?} of {all}",
            accounted(&bed)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bed.delivers("after the bulk").await;
    let (peak, budget, shed) = (
        bed.metric("memory_accounted_peak_bytes"),
        bed.metric("memory_budget_bytes"),
        bed.metric("memory_caches_shed_total"),
    );
    assert_eq!(budget, 8 << 20);
    // Checks and charges are separate steps on each worker: past the limit by at most a
    // frame per worker thread.
    assert!(peak <= budget + 2 * (64 << 10), "accounted {peak} of {budget}");
    assert!(
        shed > 0,
        "caches were shed first: {}",
        bed.metrics_text()
            .lines()
            .filter(|line| line.starts_with("moq_relay_memory"))
            .collect::<Vec<_>>()
            .join("; ")
    );
    assert!(frames.load(Ordering::Relaxed) > 0);
}
