//! Every client role this workspace ships, against a relay as strict as a deployed one
//! (`moq_conformance::strict`): the `moqx` CLI's publish and subscribe, the examples'
//! clients, and every `moq-bench` profile's clients, as real processes on loopback over
//! raw QUIC. The strict relay opens an announce stream to every client right after SETUP
//! and ends the session (code 1) if the client fails it, as a deployed relay does; it
//! decodes everything strictly and reports whatever a client gets wrong.
//!
//! The first test checks the strict relay itself: a client that fails its announce stream
//! (as ours used to, with NotFound, when it had nothing to publish) loses its session.
#![allow(missing_docs)]

use std::io::Write;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use moq_conformance::strict::{Config, Report, RunningRelay, StrictRelay, deployed_limits};

/// A bound on every wait, so that a broken client fails the test instead of hanging it
/// (never a performance threshold: everything here finishes in a fraction of it).
const PATIENCE: Duration = Duration::from_secs(60);

fn strict_relay() -> RunningRelay {
    let (relay, fingerprint) = StrictRelay::bind(Config {
        bind: "127.0.0.1:0".parse().unwrap(),
        exit_on_violation: false,
        verbose: true,
    })
    .expect("the strict relay binds");
    relay.spawn(fingerprint)
}

/// A binary of this workspace, beside this package's in the target directory, built if a
/// `cargo test -p moq-conformance` alone did not build it.
fn workspace_binary(package: &str, name: &str, example: bool) -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_strict-relay"))
        .parent()
        .expect("a target directory")
        .to_path_buf();
    let path = if example {
        dir.join("examples").join(name)
    } else {
        dir.join(name)
    };
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let kind = if example { "--example" } else { "--bin" };
        let built = Command::new(cargo)
            .args(["build", "-p", package, kind, name])
            .status()
            .expect("cargo runs");
        assert!(built.success(), "building {name}");
    }
    path
}

/// Waits for `child` to exit within [`PATIENCE`]; its output.
fn finish(mut child: Child, what: &str) -> Output {
    let deadline = Instant::now() + PATIENCE;
    while child.try_wait().expect("waiting").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().expect("output");
            panic!(
                "{what} did not finish; stderr: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// Waits until the relay's report satisfies `done`; a violation fails at once.
fn wait_for(relay: &RunningRelay, what: &str, done: impl Fn(&Report) -> bool) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let report = relay.report();
        assert!(report.violations.is_empty(), "{what}: {report:?}");
        if done(&report) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {report:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn assert_clean(report: &Report) {
    assert!(
        report.violations.is_empty(),
        "the strict relay saw violations: {:#?}",
        report.violations
    );
    assert_eq!(
        report.announce_answered, report.sessions,
        "every session answered the relay's announce stream: {report:?}"
    );
}

#[test]
fn a_client_failing_the_relays_announce_stream_loses_its_session() {
    let relay = strict_relay();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(5)))
        .unwrap();
    let mut config = quiche::Config::new(quiche::PROTOCOL_VERSION).unwrap();
    config.set_application_protos(&[b"moq-lite-05"]).unwrap();
    config.verify_peer(false);
    deployed_limits(&mut config);
    let local = socket.local_addr().unwrap();
    let mut conn = quiche::connect(
        Some("localhost"),
        &quiche::ConnectionId::from_ref(&[0x3c; 16]),
        local,
        relay.addr,
        &mut config,
    )
    .unwrap();
    let drive = |conn: &mut quiche::Connection,
                 done: &mut dyn FnMut(&mut quiche::Connection) -> bool| {
        let deadline = Instant::now() + PATIENCE;
        let mut buf = [0u8; 65_536];
        while Instant::now() < deadline {
            while let Ok((len, info)) = conn.send(&mut buf) {
                socket.send_to(&buf[..len], info.to).unwrap();
            }
            if let Ok((len, from)) = socket.recv_from(&mut buf) {
                let _ = conn.recv(&mut buf[..len], quiche::RecvInfo { from, to: local });
            }
            if conn.timeout() == Some(Duration::ZERO) {
                conn.on_timeout();
            }
            if done(conn) {
                return true;
            }
        }
        false
    };
    assert!(
        drive(&mut conn, &mut |conn| conn.is_established()),
        "handshake"
    );
    // SETUP with Path "/": stream type 1; length 4; one parameter: id 2, length 1, "/".
    conn.stream_send(2, &[0x01, 0x04, 0x01, 0x02, 0x01, b'/'], true)
        .unwrap();
    // The relay's announce stream (its first bidi stream, id 1): 01, then
    // ANNOUNCE_REQUEST for "" excluding its own origin.
    let mut request = Vec::new();
    assert!(
        drive(&mut conn, &mut |conn| {
            let mut buf = [0u8; 256];
            while let Ok((len, _)) = conn.stream_recv(1, &mut buf) {
                request.extend_from_slice(&buf[..len]);
            }
            request.len() >= 4
        }),
        "the relay opens its announce stream right after SETUP"
    );
    assert_eq!(request[0], 0x01, "stream type Announce");
    assert_eq!(request[2], 0x00, "prefix \"\"");
    // What our sessions used to do with nothing to publish: refuse it with NotFound.
    conn.stream_shutdown(1, quiche::Shutdown::Write, 13)
        .unwrap();
    conn.stream_shutdown(1, quiche::Shutdown::Read, 13).unwrap();
    assert!(drive(&mut conn, &mut |conn| conn.is_closed()), "closed");
    let error = conn.peer_error().expect("closed by the relay");
    assert_eq!(error.error_code, 1, "{error:?}");
    let report = relay.stop();
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.contains("announce stream failed")),
        "{report:?}"
    );
}

#[test]
fn moq_subscribe_and_publish_pass_through_a_strict_relay() {
    subscribe_and_publish("moq-lite-05", "moq-lite-05");
}

#[test]
fn moq_subscribe_and_publish_on_lite04_pass_through_a_strict_relay() {
    subscribe_and_publish("moq-lite-04", "moq-lite-04");
}

#[test]
fn moq_subscribe_and_publish_on_lite03_pass_through_a_strict_relay() {
    subscribe_and_publish("moq-lite-03", "moq-lite-03");
}

/// A -05 publisher and a -04 subscriber, and the reverse: the strict relay translates, as
/// a deployed one does, and each client speaks its own version to it.
#[test]
fn moq_subscribe_and_publish_across_versions_pass_through_a_strict_relay() {
    subscribe_and_publish("moq-lite-05", "moq-lite-04");
    subscribe_and_publish("moq-lite-03", "moq-lite-05");
}

/// `moqx publish` pinned to `publisher` and `moqx subscribe` pinned to `subscriber`, through
/// a strict relay: three lines arrive, and the relay saw no violation.
fn subscribe_and_publish(publisher: &str, subscriber: &str) {
    let relay = strict_relay();
    let moq = workspace_binary("moqx-cli", "moqx", false);
    // Before -05 raw QUIC carries no path: such a client is at the relay's root.
    let old = |version: &str| version != "moq-lite-05";
    let root = if old(publisher) || old(subscriber) {
        ""
    } else {
        "demo"
    };
    let url = format!("moqt://127.0.0.1:{}/{root}", relay.addr.port());
    let fingerprint = relay.fingerprint.clone();
    // The subscriber comes first: for a while it is a session with nothing to publish,
    // which the relay asks for announcements all the same.
    let subscriber = Command::new(&moq)
        .args(["subscribe", "--version", subscriber])
        .args(["--fingerprint", &fingerprint, &url, "live"])
        .args(["--track", "t", "--count", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&relay, "the subscriber answers the announce stream", |r| {
        r.announce_answered >= 1
    });
    let mut publisher = Command::new(&moq)
        .args(["publish", "--version", publisher])
        .args(["--fingerprint", &fingerprint, &url, "live"])
        .args(["--track", "t", "--group-size", "1", "--linger", "2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = publisher.stdin.take().unwrap();
    // Lines keep coming until the subscriber has three (it may join after the first).
    let deadline = Instant::now() + PATIENCE;
    let mut subscriber = Some(subscriber);
    let mut line = 0;
    let output = loop {
        line += 1;
        let _ = writeln!(stdin, "line {line}");
        std::thread::sleep(Duration::from_millis(100));
        let child = subscriber.as_mut().unwrap();
        if child.try_wait().unwrap().is_some() {
            break subscriber.take().unwrap().wait_with_output().unwrap();
        }
        assert!(Instant::now() < deadline, "the subscriber got nothing");
    };
    drop(stdin);
    let published = finish(publisher, "moqx publish");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "moqx subscribe: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(lines.iter().all(|l| l.starts_with("line ")), "{stdout}");
    assert!(
        published.status.success(),
        "moqx publish: {}",
        String::from_utf8_lossy(&published.stderr)
    );
    let report = relay.stop();
    assert_eq!(report.sessions, 2);
    assert_clean(&report);
}

#[test]
fn the_examples_clients_pass_through_a_strict_relay() {
    let relay = strict_relay();
    let url = format!("moqt://127.0.0.1:{}/room", relay.addr.port());
    let fingerprint = relay.fingerprint.clone();

    let chat = workspace_binary("moq-examples", "chat", true);
    let output = Command::new(&chat)
        .args([&url, "--fingerprint", &fingerprint])
        .args(["--users", "3", "--messages", "4", "--rate", "20", "--json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "chat: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    // Three users, four messages each, each heard by the two others.
    assert_eq!(summary["delivered"], 24, "{summary}");

    let clock = workspace_binary("moq-examples", "clock", true);
    let url = format!("moqt://127.0.0.1:{}/", relay.addr.port());
    let publisher = Command::new(&clock)
        .args([
            &url,
            "--fingerprint",
            &fingerprint,
            "publish",
            "--count",
            "4",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let subscriber = Command::new(&clock)
        .args([
            &url,
            "--fingerprint",
            &fingerprint,
            "subscribe",
            "--count",
            "2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let printed = finish(subscriber, "clock subscribe");
    assert!(
        printed.status.success(),
        "clock subscribe: {}",
        String::from_utf8_lossy(&printed.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&printed.stdout).lines().count(), 2);
    let published = finish(publisher, "clock publish");
    assert!(
        published.status.success(),
        "clock publish: {}",
        String::from_utf8_lossy(&published.stderr)
    );
    let report = relay.stop();
    assert!(report.sessions >= 5, "{report:?}");
    assert_clean(&report);
}

#[test]
fn every_moq_bench_profile_passes_through_a_strict_relay() {
    let bench = workspace_binary("moq-bench", "moq-bench", false);
    // The relay as a process of its own, as moq-bench runs relays: it exits (status 1)
    // at the first violation, which fails the round with the violation quoted.
    let relay = format!(
        "{} --bind 127.0.0.1:{{port}} --fingerprint-file {{fingerprint_file}}",
        env!("CARGO_BIN_EXE_strict-relay")
    );
    let dir = tempfile::tempdir().unwrap();
    for profile in [
        &["--profile", "chat", "--connections", "6", "--room", "3"][..],
        &["--profile", "fanout-chat", "--subscribers", "3"],
        &[
            "--profile",
            "media",
            "--subscribers",
            "3",
            "--group-seconds",
            "0.5",
        ],
        &[
            "--profile",
            "fanout-media",
            "--subscribers",
            "3",
            "--group-seconds",
            "0.5",
        ],
    ] {
        let json = dir.path().join(format!("{}.jsonl", profile[1]));
        let output = Command::new(&bench)
            .arg("run")
            .args(profile)
            .args(["--seconds", "1", "--warmup-limit", "60", "--relay", &relay])
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{profile:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let record: serde_json::Value =
            serde_json::from_str(std::fs::read_to_string(&json).unwrap().trim()).unwrap();
        assert!(record["delivered"].as_u64().unwrap() > 0, "{record}");
        assert_eq!(record["delivered"], record["expected"], "{record}");
    }
}
