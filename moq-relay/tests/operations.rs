//! What an operator does to a running relay, on real processes: rotate keys and change
//! limits with SIGHUP while sessions carry on (and a broken file changes nothing), probe
//! `/health` and `/ready` through a drain, stop it at once with a second signal, move the
//! operator's routes to an ops listener, and configure it from the environment.
#![allow(missing_docs)]

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{
    PATIENCE, Relay, collect, finish, free_port, http_response, publish, subscribe, token, wait,
};
use moqx_relay::auth::{Key, KeyAlgorithm};
use nix::sys::signal::Signal;

/// Waits until `path`'s text contains `needle` (a log line), failing with the text.
fn wait_for_text(path: &Path, needle: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return;
        }
        assert!(Instant::now() < deadline, "no {needle:?} in:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `path` holds more than `seen` lines containing `needle`.
fn wait_for_another(path: &Path, needle: &str, seen: usize) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.matches(needle).count() > seen {
            return;
        }
        assert!(Instant::now() < deadline, "no new {needle:?} in:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How many lines of `path` contain `needle`.
fn count_in(path: &Path, needle: &str) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .matches(needle)
        .count()
}

/// Whether a `moqx publish` with `jwt` at `room` is accepted (it connects and finishes).
fn accepted(relay: &Relay, jwt: &str) -> bool {
    let url = relay.url("moqt", &format!("room?jwt={jwt}"));
    let mut command = relay.moq(&["publish", &url, "probe", "--linger", "0"]);
    command.stdin(Stdio::null());
    finish(command).status.success()
}

#[test]
fn sighup_rotates_keys_and_a_broken_file_changes_nothing_while_sessions_carry_on() {
    let dir = tempfile::tempdir().unwrap();
    let (keys, config, log_path) = (
        dir.path().join("keys.jwks"),
        dir.path().join("relay.toml"),
        dir.path().join("relay.log"),
    );
    let first = Key::generate(KeyAlgorithm::Hs256).unwrap().with_id("first");
    let second = Key::generate(KeyAlgorithm::Eddsa)
        .unwrap()
        .with_id("second");
    std::fs::write(&keys, common::key_set(&[&first])).unwrap();
    let file = |extra: &str| {
        format!(
            "[auth]\nkey = {:?}\naudience = [{:?}]\n{extra}",
            keys.display().to_string(),
            common::AUDIENCE
        )
    };
    std::fs::write(&config, file("")).unwrap();
    let log = std::fs::File::create(&log_path).unwrap();
    let relay = Relay::start_logging(
        &["--config", config.to_str().unwrap()],
        "moqx_relay=info",
        log,
    );
    let (first_token, second_token) = (
        token(&first, "room", &[""], &[""], 3600),
        token(&second, "room", &[""], &[""], 3600),
    );
    assert!(accepted(&relay, &first_token));
    assert!(!accepted(&relay, &second_token), "a key not yet added");

    // A session on the first key, live across the rotation.
    let url = relay.url("moqt", &format!("room?jwt={first_token}"));
    let reader = subscribe(&relay, &url, "news", 2);
    let mut writer = publish(&relay, &url, "news", "before\n");

    // Rotation, step 1: both keys.
    std::fs::write(&keys, common::key_set(&[&first, &second])).unwrap();
    relay.signal(Signal::SIGHUP);
    wait_for_text(&log_path, "reloaded");
    assert!(accepted(&relay, &second_token), "the new key");
    assert!(
        accepted(&relay, &first_token),
        "the old key, still in the set"
    );
    // Step 2: the old key removed. New sessions with its tokens are refused; the live
    // one carries on.
    std::fs::write(&keys, common::key_set(&[&second])).unwrap();
    std::fs::write(&config, file("[server]\nworkers = 3\n")).unwrap();
    relay.signal(Signal::SIGHUP);
    wait_for_text(&log_path, "in force only after a restart");
    assert!(!accepted(&relay, &first_token), "the removed key");
    assert!(accepted(&relay, &second_token));
    writeln!(writer.stdin.as_mut().unwrap(), "after").unwrap();
    let (ok, out, err) = collect(reader);
    assert!(ok, "the session from before the rotation: {err}");
    assert_eq!(out, "before\nafter\n");
    let _ = collect(writer);

    // The key file is watched: a new set is in force without a SIGHUP.
    let third = Key::generate(KeyAlgorithm::Hs256).unwrap().with_id("third");
    let third_token = token(&third, "room", &[""], &[""], 3600);
    // Settled first: the writes above may still be echoing in the watch.
    std::thread::sleep(Duration::from_millis(500));
    let read = count_in(&log_path, "the token keys were read again");
    std::fs::write(&keys, common::key_set(&[&second, &third])).unwrap();
    wait_for_another(&log_path, "the token keys were read again", read);
    let deadline = Instant::now() + PATIENCE;
    while !accepted(&relay, &third_token) {
        assert!(Instant::now() < deadline, "the watched key file's new key");
    }
    std::fs::write(&keys, common::key_set(&[&second])).unwrap();

    // A broken file and a broken key file: refused, and the relay keeps its keys.
    std::fs::write(&config, file("[limits]\nmax_sessions = \"many\"\n")).unwrap();
    relay.signal(Signal::SIGHUP);
    wait_for_text(&log_path, "reload refused");
    std::fs::write(&config, file("")).unwrap();
    std::fs::write(&keys, "{ not a key").unwrap();
    relay.signal(Signal::SIGHUP);
    wait_for_text(&log_path, "auth.key");
    assert!(accepted(&relay, &second_token), "the keys in force stay");
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert_eq!(
        log.matches("reload refused").count(),
        2,
        "both refusals are logged:\n{log}"
    );
    assert!(
        log.contains("server.workers"),
        "the restart is named:\n{log}"
    );
}

/// Whether `moqx-relay health` (with `--ready`) says the relay on `port` is well.
fn health_probe(port: u16, ready: bool) -> bool {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_moqx-relay"));
    command.args(["health", &format!("127.0.0.1:{port}")]);
    if ready {
        command.arg("--ready");
    }
    finish(command).status.success()
}

#[test]
fn ready_turns_503_in_a_drain_the_relay_exits_on_its_own_and_a_second_sigterm_at_once() {
    // A drain that ends on its own: /ready says so from its start.
    let mut relay = Relay::start(&["--drain", "3"]);
    assert!(http_response(relay.port, "/health").starts_with("HTTP/1.0 200"));
    assert!(http_response(relay.port, "/ready").starts_with("HTTP/1.0 200"));
    assert!(
        health_probe(relay.port, true),
        "`moqx-relay health --ready`"
    );
    let mut writer = publish(&relay, &relay.url("moqt", "demo"), "live", "one\n");
    relay.wait_for_metric("sessions", 1);
    relay.signal(Signal::SIGTERM);
    let deadline = Instant::now() + PATIENCE;
    while !http_response(relay.port, "/ready").starts_with("HTTP/1.0 503") {
        assert!(Instant::now() < deadline, "/ready never turned 503");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(http_response(relay.port, "/ready").contains("draining"));
    let mut child = relay.child.take().unwrap();
    let status = wait(&mut child, PATIENCE).expect("the drain ends on its own");
    assert!(status.success(), "{status}");
    // Its relay gone, the publisher has nothing left to do.
    let _ = writer.kill();
    let _ = writer.wait();

    // At its session limit it is not ready; a second SIGTERM ends a long drain at once.
    let mut relay = Relay::start(&["--drain", "600", "--max-sessions", "1"]);
    writer = publish(&relay, &relay.url("moqt", "demo"), "live", "one\n");
    relay.wait_for_metric("sessions", 1);
    let full = http_response(relay.port, "/ready");
    assert!(
        full.starts_with("HTTP/1.0 503") && full.contains("max_sessions"),
        "{full}"
    );
    relay.signal(Signal::SIGTERM);
    let deadline = Instant::now() + PATIENCE;
    while !http_response(relay.port, "/ready").contains("draining") {
        assert!(Instant::now() < deadline, "the drain never began");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(health_probe(relay.port, false), "alive while draining");
    assert!(!health_probe(relay.port, true), "not ready while draining");
    relay.signal(Signal::SIGTERM);
    let mut child = relay.child.take().unwrap();
    let status = wait(&mut child, PATIENCE).expect("a second SIGTERM exits at once");
    assert_eq!(status.code(), Some(143), "{status}");
    // Its relay gone, the publisher has nothing left to do.
    let _ = writer.kill();
    let _ = writer.wait();
}

#[test]
fn the_ops_listener_takes_the_operators_routes_and_the_environment_configures_the_relay() {
    let ops_port = free_port();
    let ops = format!("127.0.0.1:{ops_port}");
    let relay = Relay::start_with_env(
        free_port(),
        &[],
        &[("MOQ_OPS_BIND", &ops), ("MOQ_MAX_SESSIONS", "1")],
        "error",
        Stdio::inherit(),
    );
    let mut writer = publish(&relay, &relay.url("moqt", "demo"), "live", "one\n");
    common::wait_for_metric_on(ops_port, "sessions", 1);

    // The public port: what clients need, and the probes.
    for (path, status) in [
        ("/certificate.sha256", 200),
        ("/health", 200),
        ("/metrics", 404),
        ("/cluster", 404),
        ("/debug/sessions", 404),
    ] {
        let response = http_response(relay.port, path);
        assert!(
            response.starts_with(&format!("HTTP/1.0 {status}")),
            "public {path}: {response}"
        );
    }
    // The ops port: metrics with the process's figures, and the live sessions.
    let metrics = http_response(ops_port, "/metrics");
    for family in [
        "\nprocess_cpu_seconds_total ",
        "\nprocess_resident_memory_bytes ",
        "\nprocess_open_fds ",
        "\nprocess_start_time_seconds ",
        "\nmoq_relay_build_info{version=\"",
    ] {
        assert!(metrics.contains(family), "{family} in {metrics}");
    }
    let sessions = http_response(ops_port, "/debug/sessions");
    let body = sessions.split_once("\r\n\r\n").unwrap().1;
    let sessions: serde_json::Value = serde_json::from_str(body).unwrap();
    let session = &sessions.as_array().unwrap()[0];
    assert_eq!(session["binding"], "quic", "{session}");
    assert!(
        session["peer"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{session}"
    );
    assert!(session["established"].as_bool().unwrap(), "{session}");
    // MOQ_MAX_SESSIONS=1: full with one session, on both ports.
    for port in [relay.port, ops_port] {
        let ready = http_response(port, "/ready");
        assert!(
            ready.starts_with("HTTP/1.0 503") && ready.contains("max_sessions"),
            "{ready}"
        );
    }
    // No one subscribed: the publisher would wait for a reader.
    let _ = writer.kill();
    let _ = writer.wait();
}

/// The certificate served at `/certificate.sha256`, as hex.
fn served_fingerprint(relay: &Relay) -> String {
    relay.http_get("/certificate.sha256")
}

/// Whether a `moqx publish` pinning `fingerprint` is accepted over raw QUIC.
fn accepted_pinning(relay: &Relay, fingerprint: &str) -> bool {
    let mut command = std::process::Command::new(common::moq_binary());
    command
        .args(["publish", "--fingerprint", fingerprint])
        .args([&relay.url("moqt", "room"), "probe", "--linger", "0"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    finish(command).status.success()
}

/// Waits until the relay serves `fingerprint` (hex) at `/certificate.sha256`.
fn wait_for_fingerprint(relay: &Relay, fingerprint: &str) {
    let deadline = Instant::now() + PATIENCE;
    while served_fingerprint(relay) != fingerprint {
        assert!(
            Instant::now() < deadline,
            "the relay never served {fingerprint}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn hex(certificate: &moqx_runtime::tls::Certificate) -> String {
    certificate
        .fingerprint()
        .0
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[test]
fn renewed_certificate_files_reach_new_clients_while_a_session_carries_on() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["localhost".to_owned(), "127.0.0.1".to_owned()];
    let (chain, key) = (
        dir.path().join("fullchain.pem"),
        dir.path().join("privkey.pem"),
    );
    // As certbot and cert-manager do: new files written beside, then renamed over.
    let install = |certificate: &moqx_runtime::tls::Certificate| {
        for (path, text) in [
            (&chain, certificate.chain_pem()),
            (&key, certificate.key_pem()),
        ] {
            let staged = path.with_extension("new");
            std::fs::write(&staged, text).unwrap();
            std::fs::rename(&staged, path).unwrap();
        }
    };
    let first = moqx_runtime::tls::Certificate::self_signed(&names).unwrap();
    install(&first);
    let log_path = dir.path().join("relay.log");
    let relay = Relay::start_logging(
        &[
            "--tls-cert",
            chain.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
        "moqx_relay=info",
        std::fs::File::create(&log_path).unwrap(),
    );
    assert_eq!(served_fingerprint(&relay), hex(&first));
    let url = relay.url("moqt", "room");
    let reader = subscribe(&relay, &url, "news", 2);
    let mut writer = publish(&relay, &url, "news", "before\n");

    let second = moqx_runtime::tls::Certificate::self_signed(&names).unwrap();
    install(&second);
    wait_for_fingerprint(&relay, &hex(&second));
    assert!(accepted_pinning(&relay, &second.fingerprint().to_string()));
    assert!(
        !accepted_pinning(&relay, &first.fingerprint().to_string()),
        "the old one"
    );
    writeln!(writer.stdin.as_mut().unwrap(), "after").unwrap();
    let (ok, out, err) = collect(reader);
    assert!(ok, "the session from before the renewal: {err}");
    assert_eq!(out, "before\nafter\n");
    let _ = collect(writer);

    // A broken renewal: logged, and the certificate in force stays.
    std::fs::write(&key, "not a key").unwrap();
    wait_for_text(&log_path, "the certificate in force stays");
    assert_eq!(served_fingerprint(&relay), hex(&second));
    assert!(accepted_pinning(&relay, &second.fingerprint().to_string()));
}

#[test]
fn a_self_signed_certificate_is_made_anew_before_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("relay.toml");
    std::fs::write(&config, "[tls]\nself_signed_validity_secs = 6\n").unwrap();
    let relay = Relay::start(&["--config", config.to_str().unwrap()]);
    let first = served_fingerprint(&relay);
    // Renewed every 4.5 s: a client pins what is served, and tries again if a renewal
    // came between its fetch and its handshake (a loaded machine).
    let deadline = Instant::now() + PATIENCE;
    loop {
        let served = served_fingerprint(&relay);
        if served != first {
            let pinned = moqx_runtime::tls::Fingerprint::parse(&served)
                .unwrap()
                .to_string();
            if accepted_pinning(&relay, &pinned) {
                break;
            }
            assert_ne!(
                served_fingerprint(&relay),
                served,
                "the new certificate refused"
            );
        }
        assert!(Instant::now() < deadline, "no new certificate");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn each_connection_gets_a_qlog_that_parses_as_json_seq_and_the_key_log_its_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let (qlogs, keys) = (dir.path().join("qlog"), dir.path().join("keys.log"));
    let relay = Relay::start_with_env(
        free_port(),
        &["--qlog-dir", qlogs.to_str().unwrap()],
        &[("SSLKEYLOGFILE", keys.to_str().unwrap())],
        "error",
        Stdio::inherit(),
    );
    assert!(accepted(&relay, ""), "one session");
    // The relay writes the file out as the connection goes, the rest when it is dropped.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = std::fs::read_dir(&qlogs)
            .unwrap()
            .filter_map(|entry| std::fs::read(entry.unwrap().path()).ok())
            .next()
            .unwrap_or_default();
        // JSON-SEQ (RFC 7464): each record a record separator, a JSON text, a newline;
        // the last one may still be on its way.
        let records: Vec<serde_json::Value> = text
            .split(|&byte| byte == 0x1e)
            .filter_map(|record| serde_json::from_slice(record).ok())
            .collect();
        let complete = text
            .split(|&byte| byte == 0x1e)
            .filter(|r| !r.is_empty())
            .count();
        let names: Vec<&str> = records
            .iter()
            .skip(1)
            .filter_map(|event| event["name"].as_str())
            .collect();
        if names.iter().any(|name| name.ends_with("packet_received"))
            && names.iter().any(|name| name.ends_with("packet_sent"))
        {
            assert_eq!(
                records[0]["serialization_format"], "JSON-SEQ",
                "{}",
                records[0]
            );
            assert!(records.len() + 1 >= complete, "every whole record parses");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no qlog events in {}: {names:?}",
            qlogs.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let keys = std::fs::read_to_string(&keys).unwrap();
    assert!(keys.contains("CLIENT_HANDSHAKE_TRAFFIC_SECRET "), "{keys}");
}

/// A JWK Set served over HTTP from a thread: what `/jwks` answers is `served`'s text.
fn serve_key_set(served: std::sync::Arc<std::sync::Mutex<String>>) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = std::io::Read::read(&mut stream, &mut request);
            let body = served.lock().unwrap().clone();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn keys_at_a_url_are_fetched_and_fetched_again() {
    let first = Key::generate(KeyAlgorithm::Hs256).unwrap().with_id("first");
    let second = Key::generate(KeyAlgorithm::Eddsa)
        .unwrap()
        .with_id("second");
    let served = std::sync::Arc::new(std::sync::Mutex::new(common::key_set(&[&first])));
    let port = serve_key_set(served.clone());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("relay.toml");
    std::fs::write(
        &config,
        format!("[auth]\nkey_url = \"http://127.0.0.1:{port}/jwks\"\nkey_refresh_secs = 1\n"),
    )
    .unwrap();
    let log_path = dir.path().join("relay.log");
    let relay = Relay::start_logging(
        &["--config", config.to_str().unwrap()],
        "moqx_relay=info",
        std::fs::File::create(&log_path).unwrap(),
    );
    let audience_free = |key: &Key| {
        let claims = moqx_relay::auth::Claims {
            root: "room".into(),
            publish: vec![String::new()],
            ..Default::default()
        };
        key.sign(&claims).unwrap()
    };
    assert!(accepted(&relay, &audience_free(&first)));
    assert!(!accepted(&relay, &audience_free(&second)));
    *served.lock().unwrap() = common::key_set(&[&second]);
    wait_for_text(&log_path, "the token keys were read again");
    assert!(accepted(&relay, &audience_free(&second)));
    assert!(
        !accepted(&relay, &audience_free(&first)),
        "the key the URL no longer serves"
    );
    // A URL that stops answering keeps the keys in force.
    *served.lock().unwrap() = "{ broken".to_owned();
    wait_for_text(&log_path, "the keys in force stay");
    assert!(accepted(&relay, &audience_free(&second)));
}

#[test]
fn sighup_applies_a_new_log_filter() {
    let dir = tempfile::tempdir().unwrap();
    let (config, log_path) = (dir.path().join("relay.toml"), dir.path().join("relay.log"));
    std::fs::write(&config, "[log]\nfilter = \"warn\"\n").unwrap();
    // No RUST_LOG: the file's filter decides.
    let relay = Relay::start_logging(
        &["--config", config.to_str().unwrap()],
        "",
        std::fs::File::create(&log_path).unwrap(),
    );
    std::fs::write(&config, "[log]\nfilter = \"moqx_relay=info\"\n").unwrap();
    relay.signal(Signal::SIGHUP);
    wait_for_text(&log_path, "reloaded");
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        !log.contains("relay listening"),
        "info was filtered out at first:\n{log}"
    );
    assert!(log.contains("log.filter"), "the change is named:\n{log}");
}
