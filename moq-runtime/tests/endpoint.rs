//! Two endpoints exchanging datagrams in memory: connection IDs of our own, the connection
//! table, timers, and send batching across connections, with sessions on top.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{BusyRuntime, certificate_files, config};
use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::session::{self, SessionConfig};
use moqx_net::transport::Session as _;
use moqx_runtime::cid::{CID_LEN, ConnectionId};
use moqx_runtime::endpoint::{Endpoint, MAX_SPARE_CIDS, SILENCE_PROBE, SILENCE_PROBES, Transmit};
use moqx_runtime::quic::QuicConnection;
use moqx_runtime::quiche_config::MAX_CLIENT_PATHS;
use moqx_runtime::reset::StatelessResetKey;

const CLIENT: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 5000);
const SERVER: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 5443);

/// Delivers every transmit between the two endpoints (split back into datagrams, as the
/// receiving kernel would), runs timers, and returns what was sent, for inspection.
fn exchange(client: &mut Endpoint, server: &mut Endpoint) -> Vec<Transmit> {
    let now = Instant::now();
    let mut sent = Vec::new();
    for client_to_server in [true, false] {
        let mut transmits = Vec::new();
        let (source, sink, from_addr) = if client_to_server {
            (&mut *client, &mut *server, CLIENT)
        } else {
            (&mut *server, &mut *client, SERVER)
        };
        source.handle_timeouts(now);
        source.poll_transmits(now, &mut transmits);
        for transmit in &transmits {
            for datagram in transmit.contents.chunks(transmit.segment_size) {
                let mut datagram = datagram.to_vec();
                let _ = sink.handle_datagram(&mut datagram, from_addr, None, now);
            }
        }
        sent.extend(transmits);
    }
    sent
}

fn run_until(
    runtime: &BusyRuntime,
    client: &mut Endpoint,
    server: &mut Endpoint,
    mut done: impl FnMut(&mut Endpoint, &mut Endpoint) -> bool,
) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        exchange(client, server);
        runtime.turn();
        if done(client, server) {
            return true;
        }
    }
    false
}

/// Hands every datagram of `transmits` to `sink`, as from `from`.
fn deliver(transmits: &[Transmit], sink: &mut Endpoint, from: SocketAddr, now: Instant) {
    for transmit in transmits {
        for datagram in transmit.contents.chunks(transmit.segment_size) {
            let _ = sink.handle_datagram(&mut datagram.to_vec(), from, None, now);
        }
    }
}

/// Runs `client` and `server` until `connection` (the client's) is established, then
/// lets what is in flight settle; returns the server's side of it.
fn established(
    runtime: &BusyRuntime,
    client: &mut Endpoint,
    server: &mut Endpoint,
    connection: &QuicConnection,
) -> QuicConnection {
    let mut accepted = None;
    assert!(run_until(runtime, client, server, |_, server| {
        accepted = accepted.take().or_else(|| server.accept());
        connection.is_established() && accepted.is_some()
    }));
    for _ in 0..10 {
        exchange(client, server);
    }
    accepted.expect("accepted")
}

fn endpoints(name: &str) -> (Endpoint, Endpoint) {
    let (_certificate_dir, chain, key) = certificate_files(name);
    let now = Instant::now();
    let client = Endpoint::new(config(None), CLIENT, 0, 100, now);
    let server = Endpoint::new(config(Some((&chain, &key))), SERVER, 3, 100, now);
    (client, server)
}

#[test]
fn a_client_endpoint_connects_and_a_session_runs_through_the_table() {
    let runtime = BusyRuntime::default();
    let (mut client, mut server) = endpoints("table");
    let connection = client.connect("localhost", SERVER, Instant::now()).unwrap();
    let mut accepted = None;
    assert!(run_until(
        &runtime,
        &mut client,
        &mut server,
        |_, server| {
            if accepted.is_none() {
                accepted = server.accept();
            }
            accepted.is_some() && connection.is_established()
        }
    ));
    assert_eq!((client.len(), server.len()), (1, 1));

    let published = Origin::new();
    let broadcast = BroadcastProducer::new();
    let mut track = broadcast.create_track(Track::new("t"));
    published.publish("live", &broadcast).unwrap();
    let _server_session = session::accept(
        runtime.clone(),
        accepted.unwrap().session().into(),
        SessionConfig::default().with_publisher(&published),
    );
    let seen = Origin::new();
    let _client_session = session::connect(
        runtime.clone(),
        connection.session().into(),
        SessionConfig::default().with_subscriber(&seen),
    );
    assert!(run_until(&runtime, &mut client, &mut server, |_, _| seen
        .consume_broadcast("live")
        .is_some()));
    let remote = seen.consume_broadcast("live").unwrap();
    let frames = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let sink = frames.clone();
    runtime.spawn_task(async move {
        let Ok(mut track) = remote.subscribe_track("t").await else {
            return;
        };
        while let Ok(Some(mut group)) = track.next_group().await {
            while let Ok(Some(frame)) = group.read_frame().await {
                sink.borrow_mut().push(frame.payload);
            }
        }
    });
    assert!(run_until(&runtime, &mut client, &mut server, |_, _| track
        .consumer_count()
        > 0));
    let mut group = track.append_group();
    group.write(0, "through the table");
    group.finish();
    assert!(run_until(&runtime, &mut client, &mut server, |_, _| frames
        .borrow()
        .len()
        == 1));
}

#[test]
fn server_connection_ids_name_the_worker() {
    let runtime = BusyRuntime::default();
    let (mut client, mut server) = endpoints("steer");
    use moqx_net::transport::Session as _;
    let connection = client.connect("localhost", SERVER, Instant::now()).unwrap();
    assert!(run_until(
        &runtime,
        &mut client,
        &mut server,
        |_, server| { server.accept().is_some() }
    ));
    assert!(run_until(&runtime, &mut client, &mut server, |_, _| {
        connection.is_established()
    }));
    // Every datagram the client sends now carries the server's CID: worker 3 of 4.
    connection
        .session()
        .send_datagram(bytes::Bytes::from_static(b"probe"))
        .unwrap();
    let mut transmits = Vec::new();
    client.poll_transmits(Instant::now(), &mut transmits);
    let mut checked = 0;
    for transmit in transmits {
        for datagram in transmit.contents.chunks(transmit.segment_size) {
            assert!(datagram.len() > CID_LEN);
            // A short-header packet: its DCID right after the first byte, whose first
            // byte (what the steering program reads) names worker 3.
            assert_eq!(datagram[0] & 0x80, 0, "a short header");
            let dcid = ConnectionId::from_bytes(&datagram[1..1 + CID_LEN]).unwrap();
            assert_eq!(dcid.worker(), 3);
            checked += 1;
        }
    }
    assert!(checked > 0, "a packet was sent");
}

#[test]
fn packets_of_many_connections_to_one_host_leave_in_gso_batches() {
    let runtime = BusyRuntime::default();
    let (mut client, mut server) = endpoints("batch");
    let connections: Vec<_> = (0..8)
        .map(|_| client.connect("localhost", SERVER, Instant::now()).unwrap())
        .collect();
    let mut accepted = Vec::new();
    let mut batched = false;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        for transmit in exchange(&mut client, &mut server) {
            if transmit.contents.len() > transmit.segment_size {
                batched = true;
            }
        }
        runtime.turn();
        while let Some(connection) = server.accept() {
            accepted.push(connection);
        }
        if accepted.len() == 8 && connections.iter().all(|c| c.is_established()) {
            break;
        }
    }
    assert_eq!(accepted.len(), 8, "every handshake completed");
    assert!(
        batched,
        "the handshakes of eight connections to one address share GSO batches"
    );
}

/// A quiet established connection sends a PING once its keep-alive interval passes, so
/// that the peer's idle timer does not close it; without a keep-alive it sends nothing.
/// (Found by the hostile-peer suite: a good pair quiet for 40 s was closed by the relay's
/// 30 s idle timeout.) Time is given to the endpoint, so the test waits for nothing.
#[test]
fn a_quiet_connection_sends_a_keep_alive_once_its_interval_passes() {
    for keep_alive in [Some(Duration::from_secs(5)), None] {
        let runtime = BusyRuntime::default();
        let (mut client, mut server) = endpoints(&format!("keep-alive-{}", keep_alive.is_some()));
        client.set_keep_alive(keep_alive);
        let connection = client.connect("localhost", SERVER, Instant::now()).unwrap();
        // Everything in flight settled: nothing more to send now.
        established(&runtime, &mut client, &mut server, &connection);
        let mut quiet = Vec::new();
        client.poll_transmits(Instant::now(), &mut quiet);
        assert!(quiet.is_empty(), "nothing to send while nothing happens");

        let later = Instant::now() + Duration::from_secs(6);
        client.handle_timeouts(later);
        let mut sent = Vec::new();
        client.poll_transmits(later, &mut sent);
        assert_eq!(
            !sent.is_empty(),
            keep_alive.is_some(),
            "a PING once the interval passed, and only with a keep-alive ({keep_alive:?})"
        );
    }
}

/// A client with a connection-ID rotation switches to another ID its server gave it at
/// every interval, each one new, more times than the server has spares at once: the
/// server takes each retired ID back and issues another, and the connection goes on.
#[test]
fn a_client_rotating_connection_ids_uses_a_new_one_each_time() {
    let runtime = BusyRuntime::default();
    let (mut client, mut server) = endpoints("cid-rotation");
    client.set_keep_alive(Some(Duration::from_secs(10)));
    client.set_cid_rotation(Some(Duration::from_secs(1)));
    let connection = client.connect("localhost", SERVER, Instant::now()).unwrap();
    established(&runtime, &mut client, &mut server, &connection);
    let dcid = |transmits: &[Transmit]| {
        let mut first = transmits.first().expect("a packet").contents.clone();
        let header = quiche::Header::from_slice(&mut first, CID_LEN).unwrap();
        header.dcid.to_vec()
    };

    let mut at = Instant::now();
    connection.ping();
    let mut packet = [0u8; 2048];
    let (len, _) = connection.send(&mut packet).unwrap().expect("the PING");
    let header = quiche::Header::from_slice(&mut packet[..len], CID_LEN).unwrap();
    let mut used = vec![header.dcid.to_vec()];
    let _ = server.handle_datagram(&mut packet[..len], CLIENT, None, at);
    for rotation in 0..=MAX_SPARE_CIDS + 2 {
        at += Duration::from_millis(1_100);
        client.handle_timeouts(at);
        connection.ping();
        let mut sent = Vec::new();
        client.poll_transmits(at, &mut sent);
        let id = dcid(&sent);
        assert!(
            !used.contains(&id),
            "rotation {rotation}: an ID used before"
        );
        used.push(id);
        deliver(&sent, &mut server, CLIENT, at);
        // The server retires the old ID and issues another.
        for _ in 0..4 {
            exchange(&mut client, &mut server);
        }
        assert!(!connection.is_closed(), "rotation {rotation}");
    }
}

/// A server needs one of its client's connection IDs for each address the client is seen
/// at (quiche keeps a path for each, and retires none): a client endpoint gives its
/// server one for every path the server keeps. With the four spares a server gives its
/// clients, the client's sixth address found none (the 2-hour rebinding soaks cut
/// members off from there on).
#[test]
fn a_client_gives_its_server_a_connection_id_for_each_path_it_keeps() {
    let runtime = BusyRuntime::default();
    // The limits of `moqx_runtime::quiche_config`'s client and server configurations.
    let (_certificate_dir, chain, key) = certificate_files("client-cids");
    let mut client_config = config(None);
    client_config.set_active_connection_id_limit(MAX_CLIENT_PATHS);
    let mut server_config = config(Some((&chain, &key)));
    server_config.set_active_connection_id_limit(MAX_CLIENT_PATHS);
    let now = Instant::now();
    let mut client = Endpoint::new(client_config, CLIENT, 0, 100, now);
    let mut server = Endpoint::new(server_config, SERVER, 3, 100, now);
    let connection = client.connect("localhost", SERVER, Instant::now()).unwrap();
    let accepted = established(&runtime, &mut client, &mut server, &connection);
    let wanted = MAX_CLIENT_PATHS as usize - 1;
    assert!(
        run_until(&runtime, &mut client, &mut server, |_, _| {
            accepted.spare_peer_cids() == wanted
        }),
        "the server holds {} spare IDs of the client's, not {wanted}",
        accepted.spare_peer_cids()
    );
    // And a server gives its client no more than its spares.
    assert_eq!(connection.spare_peer_cids(), MAX_SPARE_CIDS);
}

/// A client that was receiving data from its server and hears nothing for a second sends
/// a PING: behind a NAT that rebinds, that packet is how the server learns the client's
/// new address, and a client that only receives (a media subscriber) sends nothing else.
/// While no data comes the PINGs go on, each wait twice the one before, a few in all (a
/// PING can be lost, or reach a server that loses the client's address again). Only data
/// arms them (a PING or an ACK from the server does not, or the server's ACK of a probe
/// would arm the next: a PING a second forever); a server never sends them.
#[test]
fn a_client_whose_server_goes_silent_pings_it_a_few_times_further_apart() {
    let runtime = BusyRuntime::default();
    // Idle timeouts of a minute, so that the keep-alive (a third of that) comes after the
    // last of the PINGs.
    let (_certificate_dir, chain, key) = certificate_files("silence-probe");
    let idle = |mut config: quiche::Config| {
        config.set_max_idle_timeout(60_000);
        config
    };
    let now = Instant::now();
    let mut client = Endpoint::new(idle(config(None)), CLIENT, 0, 100, now);
    let mut server = Endpoint::new(idle(config(Some((&chain, &key)))), SERVER, 3, 100, now);
    client.set_keep_alive(Some(Duration::from_secs(20)));
    let connection = client.connect("localhost", SERVER, Instant::now()).unwrap();
    let accepted = established(&runtime, &mut client, &mut server, &connection);
    let from_server = |client: &mut Endpoint, at: Instant| {
        let mut packet = [0u8; 2048];
        while let Ok(Some((len, _))) = accepted.send(&mut packet) {
            let _ = client.handle_datagram(&mut packet[..len], SERVER, None, at);
        }
    };
    // What the client sends at `at` (its timers run first) goes to the server, and what
    // the server's connection sends then comes back; whether the client sent anything.
    let round = |client: &mut Endpoint, server: &mut Endpoint, at: Instant| {
        client.handle_timeouts(at);
        let mut sent = Vec::new();
        client.poll_transmits(at, &mut sent);
        deliver(&sent, server, CLIENT, at);
        from_server(client, at);
        !sent.is_empty()
    };

    // A PING from the server is not data.
    let start = Instant::now();
    accepted.ping();
    from_server(&mut client, start);
    round(&mut client, &mut server, start);
    assert!(
        !round(&mut client, &mut server, start + 2 * SILENCE_PROBE),
        "a PING after the server's PING"
    );

    // The server sends data at `heard`, then nothing.
    let heard = start + 2 * SILENCE_PROBE;
    accepted
        .session()
        .send_datagram(bytes::Bytes::from_static(b"news"))
        .unwrap();
    from_server(&mut client, heard);
    round(&mut client, &mut server, heard);
    assert!(
        !round(&mut client, &mut server, heard + SILENCE_PROBE / 2),
        "half a second of silence is not yet a reason to send"
    );
    let probed = heard + SILENCE_PROBE + Duration::from_millis(100);
    assert!(
        round(&mut client, &mut server, probed),
        "a PING after a second of silence"
    );
    // Each PING answered, the next comes twice as long after the one before, and after
    // the last (14 s after the first), none until the keep-alive 20 s later.
    let mut pinged = vec![probed];
    let mut at = probed;
    let end = probed + 32 * SILENCE_PROBE;
    while at < end {
        at += Duration::from_millis(100);
        if round(&mut client, &mut server, at) {
            pinged.push(at);
        }
    }
    let waits: Vec<u64> = pinged
        .windows(2)
        .map(|pair| (pair[1] - pair[0]).as_secs())
        .collect();
    assert_eq!(waits, [2, 4, 8], "each wait twice the one before");
    assert_eq!(pinged.len() as u32, SILENCE_PROBES);

    // The server's side never probes a silent client.
    let mut sent = Vec::new();
    server.handle_timeouts(end);
    server.poll_transmits(end, &mut sent);
    assert!(sent.is_empty(), "{} transmits", sent.len());
}

/// A server that lost its connections (a restart: a new endpoint on the same address,
/// with the same reset key) answers the next packet of each with a stateless reset, and
/// its client closes at once, saying why. A reset made with another key is ignored, and a
/// packet for another worker's connection ID is never answered (that connection may live
/// on its own worker).
#[test]
fn a_restarted_server_resets_its_lost_connections_at_their_next_packet() {
    let (_certificate_dir, chain, key_file) = certificate_files("stateless-reset");
    let key = StatelessResetKey::from_secret(b"the server's persistent secret");
    let other_key = StatelessResetKey::from_secret(b"another server's secret");
    // (the restarted server's key, its worker, whether the client is reset)
    for (restarted_key, worker, reset) in
        [(&key, 3, true), (&other_key, 3, false), (&key, 4, false)]
    {
        let runtime = BusyRuntime::default();
        let now = Instant::now();
        let mut client = Endpoint::new(config(None), CLIENT, 0, 100, now);
        client.set_keep_alive(Some(Duration::from_secs(5)));
        let server_config = || config(Some((&chain, &key_file)));
        let mut server = Endpoint::new(server_config(), SERVER, 3, 100, now);
        server.set_stateless_reset_key(key.clone());
        let connection = client.connect("localhost", SERVER, now).unwrap();
        assert!(run_until(
            &runtime,
            &mut client,
            &mut server,
            |_, server| {
                let _ = server.accept();
                connection.is_established()
            }
        ));
        for _ in 0..10 {
            exchange(&mut client, &mut server);
        }

        let mut restarted = Endpoint::new(server_config(), SERVER, worker, 100, now);
        restarted.set_stateless_reset_key(restarted_key.clone());
        // The client's next packet (a keep-alive PING) reaches the restarted server.
        let later = Instant::now() + Duration::from_secs(6);
        client.handle_timeouts(later);
        let mut pings = Vec::new();
        client.poll_transmits(later, &mut pings);
        assert!(!pings.is_empty(), "a keep-alive");
        deliver(&pings, &mut restarted, CLIENT, later);
        let mut answers = Vec::new();
        restarted.poll_transmits(later, &mut answers);
        deliver(&answers, &mut client, SERVER, later);
        let counters = restarted.counters();
        let resets = counters
            .stateless_resets
            .load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(resets, u64::from(worker == 3), "worker {worker}");
        assert_eq!(answers.len() as u64, resets);
        if let Some(answer) = answers.first() {
            assert!(
                answer.contents.len() < pings[0].contents.len(),
                "shorter than its trigger"
            );
            assert!(answer.contents.len() >= moqx_runtime::reset::MIN_RESET_LEN);
        }
        assert_eq!(
            connection.is_closed(),
            reset,
            "worker {worker}, reset {reset}"
        );
        if reset {
            let reason = connection.close_reason();
            assert!(reason.contains("stateless reset"), "{reason}");
        }
    }
}
