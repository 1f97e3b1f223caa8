//! The relay and the `moqx` CLI as real processes on loopback: publish with `moqx publish`,
//! receive with `moqx subscribe` through `moqx-relay`, over both bindings; token auth
//! refusing what it must while a valid session carries on; a bad configuration file named
//! by key; and a SIGTERM drain that ends subscribers cleanly.
#![allow(missing_docs)]

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    PATIENCE, Relay, collect, finish, free_port, moq_binary, publish, subscribe, token, wait,
};
use moqx_relay::auth::{Key, KeyAlgorithm};

#[test]
fn moq_publish_reaches_moq_subscribe_through_the_relay_over_every_binding_pair() {
    let relay = Relay::start(&["--no-http"]);
    publish_reaches_subscribe(
        &relay,
        &[("moqt", "moqt"), ("https", "https"), ("moqt", "https")],
    );
}

/// `moqx publish` over each pair's first scheme reaches `moqx subscribe` over its second.
fn publish_reaches_subscribe(relay: &Relay, pairs: &[(&str, &str)]) {
    publish_reaches_subscribe_at(relay, pairs, |scheme| relay.url(scheme, "demo"));
}

/// [`publish_reaches_subscribe`], each scheme's URL from `url`.
fn publish_reaches_subscribe_at(
    relay: &Relay,
    pairs: &[(&str, &str)],
    url: impl Fn(&str) -> String,
) {
    for (publisher, subscriber) in pairs {
        let path = format!("{publisher}-to-{subscriber}");
        let reader = subscribe(relay, &url(subscriber), &path, 3);
        let writer = publish(relay, &url(publisher), &path, "one\ntwo\nthree\n");
        let (ok, out, err) = collect(reader);
        assert!(ok, "{publisher} -> {subscriber}: subscriber failed: {err}");
        assert_eq!(out, "one\ntwo\nthree\n", "{publisher} -> {subscriber}");
        let (ok, _, err) = collect(writer);
        assert!(ok, "{publisher} -> {subscriber}: publisher failed: {err}");
    }
}

/// QMux clients on the relay's TCP port (the same number as its UDP one): WebSocket
/// (`ws://`, `wss://`) and TLS (`tls://`) clients reach QUIC and WebTransport clients and
/// each other, as do plain-TCP ones (`tcp://`) on `--tcp-bind`; `/metrics` counts them
/// by binding, and `--no-websocket` turns WebSocket clients away.
#[test]
fn qmux_clients_meet_quic_clients_on_the_same_port_and_are_counted_by_binding() {
    let tcp_port = free_port();
    let tcp_bind = format!("127.0.0.1:{tcp_port}");
    let relay = Relay::start(&["--tcp-bind", &tcp_bind]);
    publish_reaches_subscribe_at(
        &relay,
        &[
            ("ws", "ws"),
            ("moqt", "ws"),
            ("ws", "https"),
            ("wss", "tls"),
            ("tls", "moqt"),
            ("tcp", "ws"),
        ],
        |scheme| match scheme {
            "tcp" => format!("tcp://{tcp_bind}/demo"),
            scheme => relay.url(scheme, "demo"),
        },
    );
    let metrics = relay.http_get("/metrics");
    for (binding, count) in [
        ("websocket", 6),
        ("tls", 2),
        ("tcp", 1),
        ("quic", 2),
        ("webtransport", 1),
    ] {
        let line = format!(
            "moq_relay_sessions_opened_by_binding_total{{binding=\"{binding}\"}} {count}\n"
        );
        assert!(metrics.contains(&line), "{line}{metrics}");
    }

    // One session per address: a second WebSocket client from it is turned away while the
    // first holds its place, and the first goes on.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("relay.toml");
    std::fs::write(&config, "[limits]\nmax_sessions_per_address = 1\n").unwrap();
    let capped = Relay::start(&["--config", config.to_str().unwrap()]);
    let first = subscribe(&capped, &capped.url("ws", "demo"), "capped", 1);
    capped.wait_for_metric("sessions", 1);
    let second = subscribe(&capped, &capped.url("ws", "demo"), "capped", 1);
    let (ok, _, err) = collect(second);
    assert!(!ok, "a second session from one address got in past the cap");
    assert!(err.contains("503"), "{err}");
    let writer = publish(&capped, &capped.url("moqt", "demo"), "capped", "one\n");
    let (ok, out, err) = collect(first);
    assert!(ok && out == "one\n", "the first session goes on: {err}");
    let _ = collect(writer);

    let closed = Relay::start(&["--no-websocket"]);
    let reader = subscribe(&closed, &closed.url("ws", "demo"), "nothing", 1);
    let (ok, _, err) = collect(reader);
    assert!(
        !ok,
        "a WebSocket client of a relay that serves none got a session"
    );
    assert!(err.contains("WebSocket"), "{err}");
}

/// A relay accepting only -04 and -03: clients pinned to either get through and reach
/// each other (the relay's root: raw QUIC carries no path before -05), a client offering
/// only -05 is refused with the reason, and `/metrics` counts the sessions by version.
#[test]
fn the_relay_accepts_the_versions_it_is_told_and_counts_sessions_by_version() {
    let relay = Relay::start(&["--moq-version", "moq-lite-04", "--moq-version", "03"]);
    let url = relay.url("moqt", "");
    let mut reader = relay.moq(&["subscribe", "--version", "04", &url, "old", "--track", "t"]);
    let reader = reader
        .args(["--count", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut writer = relay
        .moq(&["publish", "--version", "03", &url, "old", "--track", "t"])
        .args(["--wait", "--linger", "5"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writer
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"one\ntwo\n")
        .unwrap();
    let (ok, out, err) = collect(reader);
    assert!(ok, "the -04 subscriber: {err}");
    assert_eq!(out, "one\ntwo\n");
    let metrics = relay.http_get("/metrics");
    for version in ["moq-lite-04", "moq-lite-03"] {
        let line = format!("moq_relay_sessions_opened_by_version_total{{version=\"{version}\"}} 1");
        assert!(metrics.contains(&line), "{line} in:\n{metrics}");
    }
    let (ok, _, err) = collect(writer);
    assert!(ok, "the -03 publisher: {err}");

    let refused = finish(relay.moq(&["subscribe", "--version", "05", &url, "old"]));
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("no protocol version in common") && stderr.contains("moq-lite-05"),
        "{stderr}"
    );
}

/// The thread-per-core relay, as an operator starts it: the same CLI round trips over
/// every binding pair, sessions on both workers, and each worker in `/metrics` with no
/// misrouted packet.
#[test]
fn the_thread_per_core_relay_serves_every_binding_pair_and_shows_its_workers() {
    let relay = Relay::start(&["--driver", "tokio-per-core", "--workers", "2"]);
    serves_every_binding_pair_on_two_workers(&relay);
}

/// The CLI round trips over every binding pair through a relay of two workers, and
/// `/metrics` shows both workers with datagrams and no misrouted packet.
fn serves_every_binding_pair_on_two_workers(relay: &Relay) {
    for (publisher, subscriber) in [("moqt", "moqt"), ("https", "https"), ("moqt", "https")] {
        let path = format!("{publisher}-to-{subscriber}");
        let reader = subscribe(relay, &relay.url(subscriber, "demo"), &path, 2);
        let writer = publish(relay, &relay.url(publisher, "demo"), &path, "one\ntwo\n");
        let (ok, out, err) = collect(reader);
        assert!(ok, "{publisher} -> {subscriber}: subscriber failed: {err}");
        assert_eq!(out, "one\ntwo\n", "{publisher} -> {subscriber}");
        let (ok, _, err) = collect(writer);
        assert!(ok, "{publisher} -> {subscriber}: publisher failed: {err}");
    }
    let metrics = relay.http_get("/metrics");
    for worker in ["0", "1"] {
        assert!(
            metrics.contains(&format!(
                "moq_relay_worker_misrouted_packets_total{{worker=\"{worker}\"}} 0\n"
            )),
            "{metrics}"
        );
    }
    assert!(
        metrics.contains("moq_relay_worker_datagrams_total{worker=\"1\"}"),
        "{metrics}"
    );
    // Each worker waited for work between the rounds, and counted it.
    for worker in ["0", "1"] {
        let prefix = format!("moq_relay_worker_parks_total{{worker=\"{worker}\"}} ");
        let parks: u64 = metrics
            .lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("no parks for worker {worker} in:\n{metrics}"));
        assert!(parks > 0, "worker {worker} never parked:\n{metrics}");
    }
}

/// The io_uring relay, as an operator starts it: the CLI round trips over every binding
/// pair, both workers in `/metrics` with no misrouted packet, and SIGTERM drains and
/// exits 0.
#[test]
fn the_io_uring_relay_serves_every_binding_pair_shows_its_workers_and_stops_on_sigterm() {
    let mut relay = Relay::start(&["--driver", "uring", "--workers", "2"]);
    serves_every_binding_pair_on_two_workers(&relay);
    let status = relay.terminate();
    assert!(status.success(), "the relay's exit: {status}");
}

/// Where io_uring is refused (here by a seccomp filter like a container runtime's, on the
/// relay process), `--driver uring` does not start, and says why and what to do.
#[test]
fn the_io_uring_relay_refuses_to_start_where_io_uring_is_refused() {
    use std::os::unix::process::CommandExt;
    // A classic BPF program: io_uring_setup fails with EPERM, everything else is allowed.
    #[cfg(target_arch = "x86_64")]
    const AUDIT_ARCH: u32 = 0xC000_003E;
    #[cfg(target_arch = "aarch64")]
    const AUDIT_ARCH: u32 = 0xC000_00B7;
    let op = |code: u32, k: u32, jt: u8, jf: u8| nix::libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let load = nix::libc::BPF_LD | nix::libc::BPF_W | nix::libc::BPF_ABS;
    let equal = nix::libc::BPF_JMP | nix::libc::BPF_JEQ | nix::libc::BPF_K;
    let ret = nix::libc::BPF_RET | nix::libc::BPF_K;
    let filter = [
        op(load, 4, 0, 0),
        op(equal, AUDIT_ARCH, 1, 0),
        op(ret, nix::libc::SECCOMP_RET_ALLOW, 0, 0),
        op(load, 0, 0, 0),
        op(equal, nix::libc::SYS_io_uring_setup as u32, 0, 1),
        op(
            ret,
            nix::libc::SECCOMP_RET_ERRNO | nix::libc::EPERM as u32,
            0,
            0,
        ),
        op(ret, nix::libc::SECCOMP_RET_ALLOW, 0, 0),
    ];
    let program = nix::libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    let program_address = &program as *const nix::libc::sock_fprog as usize;
    let mut command = Command::new(env!("CARGO_BIN_EXE_moqx-relay"));
    command
        .args(["--bind", "127.0.0.1:0", "--no-http", "--driver", "uring"])
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec the closure makes two system calls and allocates
    // nothing; `program` and `filter` outlive the spawn (the child has a copy of them).
    unsafe {
        command.pre_exec(move || {
            let program = program_address as *const nix::libc::sock_fprog;
            if nix::libc::prctl(nix::libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || nix::libc::syscall(
                    nix::libc::SYS_seccomp,
                    nix::libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    program,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let output = finish(command);
    assert!(!output.status.success(), "the relay must not start");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("io_uring is refused here"), "{stderr}");
    assert!(stderr.contains("tokio driver"), "{stderr}");
}

/// A relay on `driver` (its flags) requiring tokens for the audience `relay.test` signed
/// by one of `keys` (a JWK Set), with `anon` public and `live` open to anonymous viewers,
/// logging everything (`trace`) to `relay.log` in the directory it returns.
fn authenticated_relay(keys: &[&Key], driver: &[&str]) -> (Relay, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("keys.jwks");
    std::fs::write(&key_file, common::key_set(keys)).unwrap();
    let log = std::fs::File::create(dir.path().join("relay.log")).unwrap();
    let mut args = vec![
        "--auth-key",
        key_file.to_str().unwrap(),
        "--auth-public",
        "anon",
        "--auth-public-subscribe",
        "live",
        "--auth-audience",
        common::AUDIENCE,
    ];
    args.extend_from_slice(driver);
    let relay = Relay::start_logging(&args, "trace", log);
    (relay, dir)
}

/// The auth suite on the tokio driver (work-stealing).
#[test]
fn tokens_scope_sessions_and_every_bad_one_is_refused_on_tokio() {
    tokens_scope_sessions_and_every_bad_one_is_refused_while_a_valid_session_carries_on(&[]);
}

/// The auth suite thread per core.
#[test]
fn tokens_scope_sessions_and_every_bad_one_is_refused_on_tokio_per_core() {
    tokens_scope_sessions_and_every_bad_one_is_refused_while_a_valid_session_carries_on(&[
        "--driver",
        "tokio-per-core",
        "--workers",
        "2",
    ]);
}

/// The auth suite on io_uring, where a token expiring years from now once spun the
/// worker forever (review finding F3): the valid token here expires in ten years.
#[test]
fn tokens_scope_sessions_and_every_bad_one_is_refused_on_io_uring() {
    tokens_scope_sessions_and_every_bad_one_is_refused_while_a_valid_session_carries_on(&[
        "--driver",
        "uring",
        "--workers",
        "2",
    ]);
}

/// A valid pair of sessions works start to end while bad tokens are refused on both
/// bindings; no token, valid or not, reaches the relay's log at any level.
fn tokens_scope_sessions_and_every_bad_one_is_refused_while_a_valid_session_carries_on(
    driver: &[&str],
) {
    // Two keys in force, chosen by the tokens' `kid`: a rotation under way.
    let key = Key::generate(KeyAlgorithm::Hs256)
        .unwrap()
        .with_id("current");
    let old = Key::generate(KeyAlgorithm::Eddsa).unwrap().with_id("old");
    let (relay, dir) = authenticated_relay(&[&key, &old], driver);
    let ten_years = 10 * 365 * 86_400;
    let good = token(&key, "room", &[""], &[""], ten_years);
    let good_old = token(&old, "room", &[""], &[""], 3600);

    // A valid pair: it must work start to end while the bad sessions are refused.
    let good_url = |scheme| relay.url(scheme, &format!("room?jwt={good}"));
    let reader = subscribe(&relay, &good_url("moqt"), "alice", 3);
    let old_url = relay.url("https", &format!("room?jwt={good_old}"));
    let writer = publish(&relay, &old_url, "alice", "a\nb\nc\n");

    let forger = Key::generate(KeyAlgorithm::Hs256).unwrap();
    let removed = Key::generate(KeyAlgorithm::Hs256)
        .unwrap()
        .with_id("removed");
    let bad = [
        ("expired", token(&key, "room", &[""], &[""], -3600)),
        ("another path", token(&key, "other", &[""], &[""], 3600)),
        (
            "another audience",
            common::token_for(&key, "room", "elsewhere.test"),
        ),
        ("a removed key", token(&removed, "room", &[""], &[""], 3600)),
        (
            "forged signature",
            token(&forger, "room", &[""], &[""], 3600),
        ),
    ];
    for scheme in ["moqt", "https"] {
        for (what, jwt) in &bad {
            let url = relay.url(scheme, &format!("room?jwt={jwt}"));
            let output = finish(relay.moq(&["publish", &url, "mallory", "--linger", "0"]));
            assert!(!output.status.success(), "{scheme}, {what}: accepted");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(
                stderr.contains("unauthorized") || stderr.contains("403"),
                "{scheme}, {what}: {stderr}"
            );
        }
        let url = relay.url(scheme, "room");
        let output = finish(relay.moq(&["subscribe", &url, "alice", "--track", "t"]));
        assert!(!output.status.success(), "{scheme}, no token: accepted");
    }
    // The public prefix needs no token.
    let anon = relay.url("moqt", "anon");
    let public_reader = subscribe(&relay, &anon, "bob", 1);
    let public_writer = publish(&relay, &anon, "bob", "hi\n");
    assert_eq!(
        collect(public_reader).1,
        "hi\n",
        "a public path works without a token"
    );
    let _ = collect(public_writer);
    // Anonymous viewers of what a signed-in publisher sends.
    let publisher = token(&key, "live", &[""], &[], 3600);
    let viewer = subscribe(&relay, &relay.url("moqt", "live"), "cam", 1);
    let camera = publish(
        &relay,
        &relay.url("https", &format!("live?jwt={publisher}")),
        "cam",
        "frame\n",
    );
    assert_eq!(collect(viewer).1, "frame\n", "an anonymous viewer of live");
    let _ = collect(camera);

    let (ok, out, err) = collect(reader);
    assert!(ok, "the valid subscriber: {err}");
    assert_eq!(out, "a\nb\nc\n");
    let (ok, _, err) = collect(writer);
    assert!(ok, "the valid publisher: {err}");

    let metrics = relay.http_get("/metrics");
    assert!(
        metrics.contains("moq_relay_connections_refused_total{reason=\"unauthorized\"} 12\n"),
        "{metrics}"
    );
    // The raw-QUIC refusals are sessions closed with the Unauthorized code at SETUP, before
    // anything of theirs was accepted (WebTransport ones never became sessions: a 403).
    assert!(
        metrics.contains("moq_relay_sessions_closed_total{error=\"unauthorized\"} 6\n"),
        "{metrics}"
    );
    // Secrets never reach the log, at any level (they used to: the whole JWT was in the
    // SETUP line at debug).
    let log = std::fs::read_to_string(dir.path().join("relay.log")).unwrap();
    assert!(
        log.contains("<redacted>"),
        "the SETUP path is logged, redacted"
    );
    for (what, jwt) in std::iter::once(("valid", &good)).chain(bad.iter().map(|(w, t)| (*w, t))) {
        let signature = jwt.rsplit('.').next().unwrap();
        assert!(
            !log.contains(signature),
            "the {what} token is in the relay's log"
        );
    }
}

#[test]
fn a_web_root_is_served_beside_the_relays_own_routes() {
    let page = tempfile::tempdir().unwrap();
    std::fs::write(page.path().join("index.html"), "<p>the page</p>").unwrap();
    std::fs::create_dir(page.path().join("pkg")).unwrap();
    std::fs::write(page.path().join("pkg").join("module.wasm"), b"\0asm").unwrap();
    let root = page.path().to_str().unwrap();
    let relay = Relay::start(&["--web-root", root]);

    let index = relay.http_response("/");
    assert!(index.starts_with("HTTP/1.0 200"), "{index}");
    assert!(index.ends_with("<p>the page</p>"), "{index}");
    // Browsers stream a module only with its own content type.
    let module = relay.http_response("/pkg/module.wasm").to_ascii_lowercase();
    assert!(
        module.contains("content-type: application/wasm"),
        "{module}"
    );
    // Nothing outside the root, and the relay's routes still answer.
    let outside = relay.http_response("/../Cargo.toml");
    assert!(outside.starts_with("HTTP/1.0 404"), "{outside}");
    assert!(
        relay
            .http_response("/missing.js")
            .starts_with("HTTP/1.0 404")
    );
    assert!(
        relay
            .http_get("/metrics")
            .contains("moq_relay_sessions 0\n")
    );
    assert!(!relay.http_get("/certificate.sha256").is_empty());
}

#[test]
fn a_web_root_that_is_not_a_directory_is_named() {
    let output = Command::new(env!("CARGO_BIN_EXE_moqx-relay"))
        .args(["--bind", "127.0.0.1:0", "--web-root", "/no/such/page"])
        .output()
        .expect("the relay binary runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("http.web_root") && stderr.contains("/no/such/page is not a directory"),
        "{stderr}"
    );
}

#[test]
fn the_certificate_fingerprint_is_served_and_the_session_limit_refuses_one_more() {
    let relay = Relay::start(&["--max-sessions", "1"]);
    let served = relay.http_get("/certificate.sha256");
    let printed: String = relay.fingerprint.chars().filter(|c| *c != ':').collect();
    assert_eq!(served, printed, "the fingerprint a browser pins");

    let first = subscribe(&relay, &relay.url("moqt", "demo"), "nobody", 1);
    // The first session is up once the relay counts it.
    let deadline = Instant::now() + PATIENCE;
    while !relay
        .http_get("/metrics")
        .contains("moq_relay_sessions 1\n")
    {
        assert!(Instant::now() < deadline, "the first session never opened");
        std::thread::sleep(Duration::from_millis(20));
    }
    for scheme in ["moqt", "https"] {
        let output = finish(relay.moq(&["announced", &relay.url(scheme, "demo")]));
        assert!(
            !output.status.success(),
            "{scheme}: a second session was let in"
        );
    }
    let metrics = relay.http_get("/metrics");
    assert!(
        metrics.contains("moq_relay_connections_refused_total{reason=\"too_many_sessions\"} 2\n"),
        "{metrics}"
    );
    let mut first = first;
    let _ = first.kill();
    let _ = first.wait();
}

#[test]
fn a_bad_config_file_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("relay.toml");
    for (text, key) in [
        ("[limits]\nmax_sesions = 5\n", "max_sesions"),
        ("[limits]\nmax_sessions = \"many\"\n", "max_sessions"),
        ("[limits]\nmax_sessions = 0\n", "limits.max_sessions"),
        (
            "[limits]\nmax_message_bytes = 10\n",
            "limits.max_message_bytes",
        ),
        (
            "[server]\nversions = [\"moq-lite-07\"]\n",
            "server.versions",
        ),
        ("[server]\nversions = []\n", "server.versions"),
    ] {
        std::fs::write(&file, text).unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_moqx-relay"))
            .arg("--config")
            .arg(&file)
            .output()
            .unwrap();
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(key), "{key}: {stderr}");
    }
}

/// A drain that reaches its deadline closes every session itself, and the subscribers end
/// cleanly: they learn of the shutdown from their session's close. Regression (a CI run
/// of 2026-12-03): the publisher's session, closed on another worker a moment earlier,
/// ended the reading subscriber's track first ("producer dropped without finishing").
/// The relay now closes the sessions serving subscriptions before the rest; the
/// publisher connects first here, so that it is also first in the relay's list.
#[test]
fn sigterm_drains_live_sessions_exits_zero_and_ends_subscribers_cleanly() {
    let log_dir = tempfile::tempdir().unwrap();
    let log_path = log_dir.path().join("relay.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut relay = Relay::start_logging(&["--drain", "1"], "moqx_relay=info", log);
    let mut writer = relay
        .moq(&[
            "publish",
            &relay.url("moqt", "demo"),
            "live",
            "--track",
            "t",
            "--wait",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = writer.stdin.take().unwrap();
    relay.wait_for_metric("sessions", 1);
    // A subscriber waiting on a broadcast, and one reading a live one.
    let waiting = subscribe(&relay, &relay.url("moqt", "demo"), "nobody", 1);
    let reading = subscribe(&relay, &relay.url("https", "demo"), "live", 1000);
    writeln!(stdin, "first").unwrap();
    relay.wait_for_metric("sessions", 3);
    // The reader's subscription is served: it is reading, not still subscribing. (Its
    // track query alone counts as a subscription being served; a reader whose SUBSCRIBE
    // had not gone out by the GOAWAY never subscribes, and its track ends at once.)
    relay.wait_for_metric("frames_sent_total", 1);

    let status = relay.terminate();
    assert!(status.success(), "the relay's exit: {status}");
    // What each subscriber said, first: if one left early, its words say why.
    let ended: Vec<_> = [("waiting", waiting), ("reading", reading)]
        .into_iter()
        .map(|(what, child)| (what, collect(child)))
        .collect();
    let said: String = ended
        .iter()
        .map(|(what, (ok, _, err))| format!("{what} (ok: {ok}): {err}\n"))
        .collect();
    // None of the three clients leaves on GOAWAY: the drain deadline, not the clients,
    // ended the drain, and the relay closed them itself.
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        log.contains("drain over") && log.contains("closed_at_deadline=3"),
        "{log}\n{said}"
    );
    for (what, (ok, _, _)) in &ended {
        assert!(ok, "the {what} subscriber did not end cleanly: {said}");
    }
    drop(stdin);
    let _ = wait(&mut writer, PATIENCE);
}

/// Review finding F6: the io_uring relay admitted sessions during its drain (they were
/// only closed at the deadline), and its exit waited for every connection, so clients
/// arriving during the drain could keep it from ever exiting. Now a client that arrives
/// during the drain is not let in, and the relay exits once the drain is over.
#[test]
fn sigterm_on_the_io_uring_relay_admits_no_one_during_the_drain_and_exits() {
    let log_dir = tempfile::tempdir().unwrap();
    let log_path = log_dir.path().join("relay.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut relay = Relay::start_logging(
        &["--driver", "uring", "--workers", "1", "--drain", "2"],
        "moqx_relay=debug,moqx_runtime=debug",
        log,
    );
    // A session that does not leave on GOAWAY: the drain lasts its whole deadline.
    let reading = subscribe(&relay, &relay.url("moqt", "demo"), "live", 1000);
    relay.wait_for_metric("sessions", 1);
    let mut child = relay.child.take().expect("running");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = Instant::now() + PATIENCE;
    while !std::fs::read_to_string(&log_path)
        .unwrap()
        .contains("the endpoint stops admitting")
    {
        assert!(Instant::now() < deadline, "the drain never began");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Arrives during the drain: never becomes a session.
    let late = Command::new(moq_binary())
        .args(["subscribe", "--fingerprint", &relay.fingerprint])
        .args([
            &relay.url("moqt", "demo"),
            "late",
            "--track",
            "t",
            "--count",
            "1",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait(&mut child, PATIENCE).expect("the relay exits after its drain");
    assert!(status.success(), "the relay's exit: {status}");
    let (late_ok, _, late_err) = collect(late);
    assert!(!late_ok, "a client arriving during the drain got a session");
    let (ok, _, err) = collect(reading);
    assert!(ok, "the live subscriber ends cleanly: {err}");
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("the endpoint stops admitting"), "{log}");
    assert_eq!(
        log.matches("quic session").count(),
        1,
        "only the first client had a session: {log}\n{late_err}"
    );
}

/// `moqx publish --file` keeps its word: a subscriber already waiting when the publisher
/// starts gets the file. (It used to leave at once, before the subscriber had subscribed,
/// and the subscriber saw "the track ended: not found".)
#[test]
fn a_published_file_reaches_a_subscriber_that_was_waiting_first() {
    let relay = Relay::start(&[]);
    let url = relay.url("moqt", "files");
    let waiting = relay
        .moq(&["subscribe", &url, "report", "--track", "t", "--count", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300)); // it waits for the announcement
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.txt");
    std::fs::write(&file, "the whole report").unwrap();
    let output = finish(relay.moq(&[
        "publish",
        &url,
        "report",
        "--track",
        "t",
        "--file",
        file.to_str().unwrap(),
    ]));
    assert!(output.status.success(), "{output:?}");
    let (ok, out, err) = collect(waiting);
    assert!(ok, "the waiting subscriber: {err}");
    assert_eq!(out, "the whole report\n");
}

/// `connect` tells the truth: a client the relay refuses learns it at once, on raw QUIC
/// as over WebTransport. (Over raw QUIC, `connect` used to return before SETUP, so the
/// clock example waited for a broadcast until killed.) The clock example and the CLI exit
/// non-zero, naming the refusal.
#[test]
fn a_client_the_relay_refuses_exits_at_once_naming_the_refusal() {
    let key = Key::generate(KeyAlgorithm::Hs256).unwrap();
    let (relay, _dir) = authenticated_relay(&[&key], &[]);
    let clock = example("clock");
    for scheme in ["moqt", "https"] {
        let url = relay.url(scheme, "room");
        let output = finish({
            let mut command = Command::new(&clock);
            command
                .args(["--fingerprint", &relay.fingerprint, &url, "subscribe"])
                .env("RUST_LOG", "warn");
            command
        });
        assert!(!output.status.success(), "{scheme}: the clock ran");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("unauthorized") || stderr.contains("403"),
            "{scheme}: {stderr}"
        );
    }
}

/// An example binary of `moq-examples`, built if it is not there yet.
fn example(name: &str) -> PathBuf {
    let relay = PathBuf::from(env!("CARGO_BIN_EXE_moqx-relay"));
    let path = relay.with_file_name("examples").join(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let built = Command::new(cargo)
            .args(["build", "-p", "moq-examples", "--example", name])
            .status()
            .expect("cargo runs");
        assert!(built.success(), "building the {name} example");
    }
    path
}
