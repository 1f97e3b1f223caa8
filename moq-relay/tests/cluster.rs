//! Relays as one network, as real processes on loopback: relays dialing each other
//! (`--cluster-connect`), a publisher on one relay and subscribers on the others, every
//! driver in one chain; each relay holds one upstream subscription per track whatever its
//! viewer count (read from `/metrics`), and `/cluster` shows the links and routes. A relay
//! killed in a redundant mesh: its viewers' neighbours carry on by the other route, and
//! it comes back into the mesh when restarted.
#![allow(missing_docs)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{PATIENCE, Relay, free_port};
use moqx_net::model::{BroadcastProducer, Origin, Track, TrackProducer};
use moqx_net::session::{Session, SessionConfig};
use moqx_runtime::tls::Fingerprint;
use moqx_tokio::ClientConfig;

/// The groups one subscriber received of one track, by sequence, in arrival order.
type Received = Arc<Mutex<Vec<u64>>>;

/// `url`'s relay, trusting its certificate.
fn client(relay: &Relay, session: SessionConfig) -> ClientConfig {
    {
        let mut client_config = ClientConfig::default();
        client_config.session = session;
        client_config.fingerprint = Fingerprint::parse(&relay.fingerprint);
        client_config
    }
}

/// A publisher on `relay` of `path` with `tracks`.
async fn publisher(
    relay: &Relay,
    path: &str,
    tracks: &[&str],
) -> (Session, BroadcastProducer, Vec<TrackProducer>) {
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new();
    let producers = tracks
        .iter()
        .map(|name| broadcast.create_track(Track::new(*name)))
        .collect();
    origin.publish(path, &broadcast).unwrap();
    let session = moqx_tokio::connect(
        &relay.url("moqt", ""),
        client(relay, SessionConfig::default().with_publisher(&origin)),
    )
    .await
    .expect("the publisher connects");
    (session, broadcast, producers)
}

/// A subscriber on `relay` reading `tracks` of `path` once it is announced there; each
/// track's groups go to its [`Received`].
async fn subscriber(relay: &Relay, path: &str, tracks: &[&str]) -> (Session, Vec<Received>) {
    let origin = Origin::new();
    let session = moqx_tokio::connect(
        &relay.url("moqt", ""),
        client(relay, SessionConfig::default().with_subscriber(&origin)),
    )
    .await
    .expect("the subscriber connects");
    let broadcast = until(|| origin.consume_broadcast(path))
        .await
        .unwrap_or_else(|| panic!("{path} is announced on port {}", relay.port));
    let mut received = Vec::new();
    for name in tracks {
        let mut track = broadcast
            .subscribe_track(name)
            .await
            .expect("the track resolves");
        let groups = Received::default();
        received.push(groups.clone());
        tokio::spawn(async move {
            while let Ok(Some(group)) = track.next_group().await {
                groups.lock().unwrap().push(group.sequence());
            }
        });
    }
    (session, received)
}

/// Polls `probe` every 20 ms until it gives something, for at most [`PATIENCE`].
async fn until<T>(mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(value) = probe() {
            return Some(value);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes one group of one frame to every track: the chat shape (a message per group).
fn send(tracks: &mut [TrackProducer], text: &str) {
    for track in tracks {
        let mut group = track.append_group();
        group.write(0, text.to_owned());
        group.finish();
    }
}

/// The value of the one sample of `metric` whose labels contain `labels`.
fn sample(metrics: &str, metric: &str, labels: &str) -> Option<u64> {
    metrics
        .lines()
        .filter(|line| line.starts_with(metric) && !line.starts_with('#'))
        .filter(|line| line.contains(labels))
        .find_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|value| value as u64)
}

/// The relay's `?fingerprint=` peer URL, with `scheme` (`moqt` for raw QUIC, `https` for
/// WebTransport).
fn peer_url(relay: &Relay, scheme: &str) -> String {
    format!(
        "{scheme}://127.0.0.1:{}/?fingerprint={}",
        relay.port, relay.fingerprint
    )
}

/// A relay of a cluster with hop id `id`, on `driver`, dialing `peers` over raw QUIC.
fn cluster_relay(id: u64, driver: &[&str], peers: &[&Relay]) -> Relay {
    cluster_relay_over("moqt", id, driver, peers)
}

/// [`cluster_relay`], dialing its peers with URLs of `scheme`.
fn cluster_relay_over(scheme: &str, id: u64, driver: &[&str], peers: &[&Relay]) -> Relay {
    let id = id.to_string();
    let mut args = vec!["--cluster-id", &id];
    args.extend_from_slice(driver);
    let urls: Vec<String> = peers.iter().map(|peer| peer_url(peer, scheme)).collect();
    for url in &urls {
        args.extend(["--cluster-connect", url]);
    }
    Relay::start(&args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_three_relays_on_every_driver_delivers_with_one_upstream_subscription_per_track()
{
    // A (tokio) <- B (tokio thread per core) <- C (io_uring): each dials the one before,
    // B over raw QUIC, C over WebTransport.
    let a = cluster_relay(1, &["--driver", "tokio"], &[]);
    let b = cluster_relay(2, &["--driver", "tokio-per-core", "--workers", "2"], &[&a]);
    let uring = ["--driver", "uring", "--workers", "2"];
    let c = cluster_relay_over("https", 3, &uring, &[&b]);
    let tracks = ["chat", "video"];
    let (_publisher, _broadcast, mut producers) = publisher(&a, "room/alice", &tracks).await;

    // Three viewers on C and two on B, all of both tracks.
    let mut viewers = Vec::new();
    for relay in [&c, &c, &c, &b, &b] {
        viewers.push(subscriber(relay, "room/alice", &tracks).await);
    }
    // Every relay subscribed upstream once per track before anything is sent.
    let upstream = |relay: &Relay| {
        sample(
            &relay.http_get("/metrics"),
            "moq_relay_cluster_peer_upstream_subscriptions",
            "direction=\"out\"",
        )
    };
    for (relay, name) in [(&c, "C"), (&b, "B")] {
        let settled = until(|| (upstream(relay) == Some(2)).then_some(())).await;
        assert!(
            settled.is_some(),
            "relay {name} holds {:?} upstream subscriptions for 2 tracks and {} viewers",
            upstream(relay),
            if name == "C" { 3 } else { 5 }
        );
    }

    const MESSAGES: u64 = 50;
    for n in 0..MESSAGES {
        send(&mut producers, &format!("message {n}"));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for (index, (_session, received)) in viewers.iter().enumerate() {
        for (track, groups) in tracks.iter().zip(received) {
            let complete =
                until(|| (groups.lock().unwrap().len() as u64 >= MESSAGES).then_some(()));
            assert!(
                complete.await.is_some(),
                "viewer {index} got {} of {MESSAGES} groups of {track}",
                groups.lock().unwrap().len()
            );
            // Each group travels on a stream of its own: they may arrive in any order,
            // but every one exactly once.
            let mut groups = groups.lock().unwrap().clone();
            groups.sort_unstable();
            assert_eq!(
                groups,
                (0..MESSAGES).collect::<Vec<_>>(),
                "viewer {index}'s {track} groups: each once, none lost"
            );
        }
    }
    // Still one upstream subscription per track on each relay, and A served B once per
    // track (inbound link, downstream subscriptions).
    assert_eq!(upstream(&c), Some(2));
    assert_eq!(upstream(&b), Some(2));
    let a_metrics = a.http_get("/metrics");
    assert_eq!(
        sample(
            &a_metrics,
            "moq_relay_cluster_peer_downstream_subscriptions",
            "direction=\"in\""
        ),
        Some(2),
        "{a_metrics}"
    );

    // `/cluster` on C: its id, its link to B up, and the route A -> B.
    let topology: serde_json::Value = serde_json::from_str(&c.http_get("/cluster")).unwrap();
    assert_eq!(topology["id"], 3);
    let links = topology["links"].as_array().unwrap();
    assert_eq!(links.len(), 1, "viewers are not peers: {links:?}");
    assert_eq!(links[0]["direction"], "out");
    assert_eq!(links[0]["state"], "up");
    assert!(
        links[0]["peer"].as_str().unwrap().starts_with("https://"),
        "over WebTransport: {links:?}"
    );
    assert_eq!(links[0]["upstream_subscriptions"], 2);
    let route = topology["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|route| route["path"] == "room/alice")
        .expect("the broadcast's route");
    assert_eq!(route["hops"], serde_json::json!([1, 2]));
}

/// A cluster relay that can be killed and started again as the same relay: the same
/// port, certificate (so the same fingerprint its peers pinned) and hop id.
struct Node {
    port: u16,
    args: Vec<String>,
    relay: Option<Relay>,
    _files: tempfile::TempDir,
}

impl Node {
    /// A relay with hop id `id` on `driver`, dialing `peers`; not started yet.
    fn new(id: u64, driver: &[&str], peers: &[&Node]) -> Self {
        let files = tempfile::tempdir().unwrap();
        let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        let certificate = moqx_runtime::tls::Certificate::self_signed(&names).unwrap();
        let (cert, key) = (files.path().join("cert.pem"), files.path().join("key.pem"));
        std::fs::write(&cert, certificate.chain_pem()).unwrap();
        std::fs::write(&key, certificate.key_pem()).unwrap();
        let mut args: Vec<String> = vec![
            "--cluster-id".into(),
            id.to_string(),
            "--tls-cert".into(),
            cert.display().to_string(),
            "--tls-key".into(),
            key.display().to_string(),
        ];
        args.extend(driver.iter().map(|arg| arg.to_string()));
        for peer in peers {
            args.push("--cluster-connect".into());
            args.push(format!(
                "moqt://127.0.0.1:{}/?fingerprint={}",
                peer.port,
                peer.relay().fingerprint
            ));
        }
        Self {
            port: free_port(),
            args,
            relay: None,
            _files: files,
        }
    }

    fn start(&mut self) -> &Relay {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        self.relay = Some(Relay::start_on(
            self.port,
            &args,
            "error",
            std::process::Stdio::inherit(),
        ));
        self.relay()
    }

    fn relay(&self) -> &Relay {
        self.relay.as_ref().expect("started")
    }

    /// SIGKILL: no GOAWAY, no close; its peers find out when the link times out.
    fn kill(&mut self) {
        if let Some(mut relay) = self.relay.take() {
            relay.kill();
        }
    }
}

/// The groups of `0..sent` that never arrived.
fn lost(received: &Received, sent: u64) -> Vec<u64> {
    let seen = received.lock().unwrap();
    (0..sent).filter(|n| !seen.contains(n)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_middle_relay_moves_its_neighbours_to_the_other_route_and_it_rejoins() {
    // A redundant mesh: A; B -> A; C -> A; D -> B and C. The publisher is on A, viewers
    // on C and D; D serves them by B or by C (an even pair: the tiebreak picks one).
    let mut a = Node::new(1, &["--driver", "tokio"], &[]);
    a.start();
    let mut b = Node::new(2, &["--driver", "tokio-per-core", "--workers", "2"], &[&a]);
    b.start();
    let mut c = Node::new(3, &["--driver", "uring", "--workers", "2"], &[&a]);
    c.start();
    let mut d = Node::new(4, &["--driver", "tokio"], &[&b, &c]);
    d.start();
    // Chat (a group per message, 5 a second) and media (a group per second of 30 frames
    // a second: a keyframe interval). What a moved subscription recovers comes from the
    // other route's caches (32 groups a track): the 3 s it takes to notice the dead link
    // must fit in them.
    let tracks = ["chat", "video"];
    let (_publisher, _broadcast, mut producers) = publisher(a.relay(), "room/alice", &tracks).await;
    let routes = |node: &Node| -> serde_json::Value {
        serde_json::from_str(&node.relay().http_get("/cluster")).unwrap()
    };
    let on_d = until(|| {
        let topology = routes(&d);
        let route = topology["routes"].as_array()?.first()?.clone();
        let hops = route["hops"].as_array()?.clone();
        (hops.len() == 2).then(|| hops[1].as_u64())?
    })
    .await
    .expect("D has a route to the broadcast");
    let mut viewers = Vec::new();
    for relay in [c.relay(), d.relay(), d.relay()] {
        viewers.push(subscriber(relay, "room/alice", &tracks).await);
    }
    // Every relay on the viewers' routes subscribed upstream before anything is sent: a
    // subscription still on its way would start at a later group than the first.
    let on_route = if on_d == 2 {
        [&c, &d, &b]
    } else {
        [&c, &d, &c]
    };
    for node in on_route {
        let upstream = || {
            sample(
                &node.relay().http_get("/metrics"),
                "moq_relay_cluster_peer_upstream_subscriptions",
                "direction=\"out\"",
            )
        };
        let settled = until(|| (upstream() == Some(2)).then_some(())).await;
        assert!(settled.is_some(), "{:?} upstream subscriptions", upstream());
    }

    let (mut chat, mut video) = (producers.remove(0), producers.remove(0));
    let writer = tokio::spawn(async move {
        let mut keyframe = None;
        for tick in 0..180u64 {
            // 6 s at 30 ticks a second.
            if tick % 6 == 0 {
                let mut group = chat.append_group();
                group.write(tick, format!("message {}", tick / 6));
                group.finish();
            }
            if tick % 30 == 0 {
                if let Some(group) = keyframe.take() {
                    moqx_net::model::GroupProducer::finish(group);
                }
                keyframe = Some(video.append_group());
            }
            if let Some(group) = keyframe.as_mut() {
                group.write(tick, vec![0u8; 1000]);
            }
            tokio::time::sleep(Duration::from_millis(33)).await;
        }
        if let Some(group) = keyframe.take() {
            group.finish();
        }
        (chat, video)
    });
    // Kill the relay D serves from, a second in.
    tokio::time::sleep(Duration::from_secs(1)).await;
    match on_d {
        2 => b.kill(),
        _ => c.kill(),
    }
    let killed = on_d;
    let (_chat, _video) = writer.await.unwrap();
    let (chat_sent, video_sent) = (30, 6);

    for (index, (session, received)) in viewers.iter().enumerate() {
        let on_killed = (index == 0 && killed == 3) || session.is_closed();
        if on_killed {
            continue; // a viewer of the killed relay lost its session with it
        }
        for ((track, groups), sent) in tracks.iter().zip(received).zip([chat_sent, video_sent]) {
            let arrived = until(|| (lost(groups, sent).len() <= 1).then_some(())).await;
            assert!(
                arrived.is_some(),
                "viewer {index} lost {:?} of {track} (the route by relay {killed} died)",
                lost(groups, sent)
            );
        }
    }
    let topology = routes(&d);
    let hops = &topology["routes"][0]["hops"];
    assert_ne!(
        hops[1], killed,
        "D serves by the surviving relay: {topology}"
    );

    // The killed relay comes back: its peers redial it (or it them) and it rejoins.
    match killed {
        2 => b.start(),
        _ => c.start(),
    };
    let back = until(|| {
        let links = routes(&d)["links"].as_array()?.clone();
        links
            .iter()
            .all(|link| link["state"] == "up")
            .then_some(links.len())
    })
    .await;
    assert_eq!(back, Some(2), "D is linked to both B and C again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_relays_clients_move_to_another_with_no_group_lost() {
    // X and Y, peered. A publisher and a subscriber, both reconnecting over [X, Y], start
    // on X; X is stopped (SIGTERM: GOAWAY, then a 3 s drain) while 20 messages a second
    // flow. Both move to Y; the subscriber's publisher stays up, so it loses nothing.
    let mut x = Node::new(1, &["--driver", "tokio", "--drain", "3"], &[]);
    x.start();
    let mut y = Node::new(2, &["--driver", "tokio"], &[&x]);
    y.start();
    let urls: Vec<String> = [&x, &y]
        .iter()
        .map(|node| node.relay().url("moqt", ""))
        .collect();
    let reconnecting = |session: SessionConfig| {
        // A pin is one certificate and these are two self-signed relays: loopback only.
        let config = ClientConfig::default()
            .with_session(session)
            .with_insecure_skip_verify();
        moqx_tokio::Reconnect::new(urls.clone(), config)
    };

    let published = Origin::new();
    let broadcast = BroadcastProducer::new();
    let mut chat = broadcast.create_track(Track::new("chat"));
    published.publish("room/alice", &broadcast).unwrap();
    let publisher = reconnecting(SessionConfig::default().with_publisher(&published));
    let seen = Origin::new();
    let subscriber = reconnecting(SessionConfig::default().with_subscriber(&seen));
    assert!(publisher.connected().await.is_some());
    assert!(subscriber.connected().await.is_some());
    let mut track = tokio::time::timeout(PATIENCE, seen.follow_track("room/alice", "chat"))
        .await
        .expect("the broadcast is announced")
        .expect("the track resolves");
    let received = Received::default();
    let out = received.clone();
    tokio::spawn(async move {
        while let Ok(Some(group)) = track.next_group().await {
            out.lock().unwrap().push(group.sequence());
        }
    });

    const MESSAGES: u64 = 80;
    for n in 0..MESSAGES {
        if n == 20 {
            x.relay().signal_terminate();
        }
        let mut group = chat.append_group();
        group.write(n, format!("message {n}"));
        group.finish();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let all = until(|| (lost(&received, MESSAGES).is_empty()).then_some(())).await;
    assert!(
        all.is_some(),
        "the subscriber lost {:?}",
        lost(&received, MESSAGES)
    );
    assert!(publisher.connects() >= 2, "the publisher moved");
    assert!(subscriber.connects() >= 2, "the subscriber moved");
    let session = subscriber.session().expect("connected");
    assert!(!session.is_closed());
    drop(broadcast);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_relays_dialers_hear_a_stateless_reset_and_link_again() {
    // Y dials X, with a peer timeout (60 s) longer than this test waits: only a stateless
    // reset can tell Y quickly that X lost the link. A publisher on Y, a viewer on X, so
    // that Y keeps sending to X. X is killed and started again with the same certificate
    // (its reset key) on the same port; Y's next packet to it is answered with a reset.
    let mut x = Node::new(1, &["--driver", "tokio-per-core", "--workers", "2"], &[]);
    x.start();
    let driver = ["--driver", "tokio", "--cluster-peer-timeout", "60"];
    let mut y = Node::new(2, &driver, &[&x]);
    y.start();
    let link = |node: &Node| -> Option<serde_json::Value> {
        let topology: serde_json::Value =
            serde_json::from_str(&node.relay().http_get("/cluster")).ok()?;
        topology["links"].as_array()?.first().cloned()
    };
    until(|| (link(&y)?["state"] == "up").then_some(()))
        .await
        .expect("Y links to X");
    let (_publisher, _broadcast, mut producers) = publisher(y.relay(), "room/bob", &["chat"]).await;
    let mut chat = producers.remove(0);
    let (_viewer, received) = subscriber(x.relay(), "room/bob", &["chat"]).await;
    let writer = tokio::spawn(async move {
        for n in 0.. {
            let mut group = chat.append_group();
            group.write(0, format!("message {n}"));
            group.finish();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    until(|| (!received[0].lock().unwrap().is_empty()).then_some(()))
        .await
        .expect("the viewer on X reads Y's publisher");

    x.kill();
    x.start();
    let ended = until(|| {
        let error = link(&y)?["last_error"].as_str()?.to_owned();
        error.contains("stateless reset").then_some(error)
    })
    .await;
    assert!(
        ended.is_some(),
        "Y's link to X ended by a stateless reset: {:?}",
        link(&y)
    );
    let resets = sample(
        &x.relay().http_get("/metrics"),
        "moq_relay_stateless_resets_sent_total",
        "",
    );
    assert!(resets >= Some(1), "X counted its resets: {resets:?}");

    // Y links again, and a new viewer on X reads the publisher on Y through it.
    until(|| (link(&y)?["state"] == "up").then_some(()))
        .await
        .expect("Y links to X again");
    let (_viewer, received) = subscriber(x.relay(), "room/bob", &["chat"]).await;
    until(|| (!received[0].lock().unwrap().is_empty()).then_some(()))
        .await
        .expect("the new viewer on X reads Y's publisher");
    writer.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gossip_links_relays_that_know_only_a_rendezvous_and_the_link_outlives_it() {
    // A is a rendezvous (node and mesh, no peers); B and C dial only A. Each learns of the
    // other from A's gossip, and the one whose URL sorts first dials the other. A viewer
    // on C then reads a publisher on B over that direct link, and goes on reading it
    // after A is killed.
    let gossiping = |id: u64, peers: &[&Node]| {
        let flags = [
            "--driver",
            "tokio",
            "--cluster-mesh",
            "--cluster-insecure-skip-verify",
        ];
        let mut node = Node::new(id, &flags, peers);
        let url = format!("moqt://127.0.0.1:{}/", node.port);
        node.args.extend(["--cluster-node".to_owned(), url]);
        node
    };
    let mut a = gossiping(1, &[]);
    a.start();
    let mut b = gossiping(2, &[&a]);
    b.start();
    let mut c = gossiping(3, &[&a]);
    c.start();
    let topology = |node: &Node| -> serde_json::Value {
        serde_json::from_str(&node.relay().http_get("/cluster")).unwrap()
    };
    let discovered_links = |node: &Node| -> usize {
        topology(node)["links"].as_array().map_or(0, |links| {
            links
                .iter()
                .filter(|link| link["discovered"] == true && link["state"] == "up")
                .count()
        })
    };
    until(|| (discovered_links(&b) + discovered_links(&c) == 1).then_some(()))
        .await
        .expect("B or C dials the other, found by gossip");
    let (lower, higher) = match b.port.to_string() < c.port.to_string() {
        true => (&b, &c),
        false => (&c, &b),
    };
    assert_eq!(
        (discovered_links(lower), discovered_links(higher)),
        (1, 0),
        "the node whose URL sorts first dials"
    );

    let (_publisher, _broadcast, mut producers) =
        publisher(b.relay(), "room/gossip", &["chat"]).await;
    let direct = until(|| {
        let topology = topology(&c);
        let route = topology["routes"]
            .as_array()?
            .iter()
            .find(|route| route["path"] == "room/gossip")?
            .clone();
        (route["hops"] == serde_json::json!([2])).then_some(())
    })
    .await;
    assert!(direct.is_some(), "C reaches B directly: {}", topology(&c));
    let (_viewer, received) = subscriber(c.relay(), "room/gossip", &["chat"]).await;
    a.kill();
    for n in 0..20u64 {
        send(&mut producers, &format!("message {n}"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let arrived = until(|| (received[0].lock().unwrap().len() >= 20).then_some(())).await;
    assert!(
        arrived.is_some(),
        "the viewer on C read everything after A died: {:?}",
        received[0].lock().unwrap()
    );
}

/// Where UDP is blocked between two relays, one dials the other over QMux on TLS
/// (`tls://`, the peer's TCP web port): the link comes up, carries a track, and the
/// dialed relay counts the session under its binding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_links_to_another_over_tls() {
    let a = cluster_relay(1, &["--driver", "tokio"], &[]);
    let b = cluster_relay_over("tls", 2, &["--driver", "tokio"], &[&a]);
    let tracks = ["chat"];
    let (_publisher, _broadcast, mut producers) = publisher(&a, "room/alice", &tracks).await;
    let (_viewer, received) = subscriber(&b, "room/alice", &tracks).await;
    const MESSAGES: u64 = 20;
    let deadline = Instant::now() + PATIENCE;
    let mut sent = 0;
    // The viewer's subscription reaches A through B's link: send until it hears, then
    // the counted messages.
    while received[0].lock().unwrap().is_empty() {
        assert!(
            Instant::now() < deadline,
            "nothing reached the viewer over the tls:// link"
        );
        send(&mut producers, &format!("warm-up {sent}"));
        sent += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for n in 0..MESSAGES {
        send(&mut producers, &format!("message {n}"));
    }
    // The counted messages are groups `sent` to `sent + MESSAGES - 1`: every one arrives.
    let counted = sent..sent + MESSAGES;
    let complete = until(|| {
        let groups = received[0].lock().unwrap();
        counted
            .clone()
            .all(|group| groups.contains(&group))
            .then_some(())
    });
    assert!(
        complete.await.is_some(),
        "{:?}",
        received[0].lock().unwrap()
    );
    let topology: serde_json::Value = serde_json::from_str(&b.http_get("/cluster")).unwrap();
    let links = topology["links"].as_array().unwrap();
    assert!(
        links[0]["peer"].as_str().unwrap().starts_with("tls://") && links[0]["state"] == "up",
        "{links:?}"
    );
    let metrics = a.http_get("/metrics");
    assert_eq!(
        sample(
            &metrics,
            "moq_relay_sessions_opened_by_binding_total",
            "binding=\"tls\""
        ),
        Some(1),
        "{metrics}"
    );
}
