//! Hostile connections and sessions: oversized or missing SETUPs, handshake and datagram
//! floods, expiring tokens, idle and closing peers.

use std::time::Duration;

use moq_conformance::hostile::{HostileClient, HostileConfig};
use moqx_net::Error;
use moqx_net::model::Origin;
use moqx_net::session::SessionConfig;
use moqx_tokio::{ClientConfig, connect};

use super::bed::{Bed, PATIENCE, hostile};
use super::raw::SETUP;

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
        ClientConfig::default()
            .with_session(SessionConfig::default().with_subscriber(&seen))
            .with_fingerprint(bed.fingerprint),
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

/// Regression: a token was checked only at connect, so a short-lived token held its session
/// forever. A session whose token runs out while it is connected is closed with
/// Unauthorized, on both bindings; the good pair (on a public prefix) goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_closed_when_its_token_expires() {
    use moqx_relay::auth::{Claims, Key, KeyAlgorithm};
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
                ..Claims::default()
            })
            .unwrap();
        let session = connect(
            &format!(
                "{scheme}://localhost:{}/private?jwt={token}",
                bed.relay.port()
            ),
            ClientConfig::default()
                .with_session(SessionConfig::default().with_subscriber(&Origin::new()))
                .with_fingerprint(bed.fingerprint),
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
