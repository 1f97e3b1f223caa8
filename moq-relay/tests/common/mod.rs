//! What the relay's process tests share: a relay as a child process on a free loopback
//! port, its HTTP side, and bounded waits.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use moqx_relay::auth::{Claims, Key};
use std::time::{Duration, Instant};

/// A bound on every wait, so that a broken relay fails the test instead of hanging it.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// `moqx-relay` running as a child process.
pub(crate) struct Relay {
    pub(crate) child: Option<Child>,
    pub(crate) port: u16,
    pub(crate) fingerprint: String,
    _scratch: tempfile::TempDir,
}

impl Relay {
    /// Starts the relay with `args` on a free loopback port and waits until it listens.
    pub(crate) fn start(args: &[&str]) -> Self {
        Self::start_logging(args, "error", Stdio::inherit())
    }

    /// Starts the relay with its log filtered by `filter` (`RUST_LOG`) going to `stderr`.
    pub(crate) fn start_logging(args: &[&str], filter: &str, stderr: impl Into<Stdio>) -> Self {
        Self::start_on(free_port(), args, filter, stderr)
    }

    /// Starts the relay on `port` (one a relay used before: a restart).
    pub(crate) fn start_on(
        port: u16,
        args: &[&str],
        filter: &str,
        stderr: impl Into<Stdio>,
    ) -> Self {
        Self::start_with_env(port, args, &[], filter, stderr)
    }

    /// Starts the relay on `port` with `env` set (`MOQ_*` variables).
    pub(crate) fn start_with_env(
        port: u16,
        args: &[&str],
        env: &[(&str, &str)],
        filter: &str,
        stderr: impl Into<Stdio>,
    ) -> Self {
        let scratch = tempfile::tempdir().unwrap();
        let fingerprint_file = scratch.path().join("fingerprint");
        let child = Command::new(env!("CARGO_BIN_EXE_moqx-relay"))
            .args(["--bind", &format!("127.0.0.1:{port}")])
            .arg("--fingerprint-file")
            .arg(&fingerprint_file)
            .args(args)
            .envs(env.iter().copied())
            .env("RUST_LOG", filter)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("the relay binary runs");
        let deadline = Instant::now() + PATIENCE;
        let fingerprint = loop {
            if let Ok(text) = std::fs::read_to_string(&fingerprint_file)
                && !text.is_empty()
            {
                break text;
            }
            assert!(
                Instant::now() < deadline,
                "the relay did not start listening"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        Self {
            child: Some(child),
            port,
            fingerprint,
            _scratch: scratch,
        }
    }

    pub(crate) fn url(&self, scheme: &str, path: &str) -> String {
        format!("{scheme}://127.0.0.1:{}/{path}", self.port)
    }

    /// A `moqx` command trusting this relay's certificate.
    pub(crate) fn moq(&self, args: &[&str]) -> Command {
        let mut command = Command::new(moq_binary());
        command
            .arg(args[0])
            .args(["--fingerprint", &self.fingerprint])
            .args(&args[1..])
            .env("RUST_LOG", "warn");
        command
    }

    /// Waits until the relay's `/metrics` reads `value` for the metric `name`
    /// (`moq_relay_` left out).
    pub(crate) fn wait_for_metric(&self, name: &str, value: u64) {
        wait_for_metric_on(self.port, name, value);
    }

    /// The body of `GET path` on the relay's HTTP side.
    pub(crate) fn http_get(&self, path: &str) -> String {
        let response = self.http_response(path);
        response
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default()
    }

    /// The whole response to `GET path` (status line, headers, body), lossily as text.
    pub(crate) fn http_response(&self, path: &str) -> String {
        http_response(self.port, path)
    }

    /// Sends `signal` to the relay without waiting.
    pub(crate) fn signal(&self, signal: nix::sys::signal::Signal) {
        let child = self.child.as_ref().expect("running");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    }
}

/// Waits until `/metrics` on the loopback TCP `port` reads `value` for the metric `name`
/// (`moq_relay_` left out).
pub(crate) fn wait_for_metric_on(port: u16, name: &str, value: u64) {
    let deadline = Instant::now() + PATIENCE;
    let line = format!("moq_relay_{name} {value}\n");
    while !http_response(port, "/metrics").contains(&line) {
        assert!(Instant::now() < deadline, "{name} never reached {value}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The whole response to `GET path` on a loopback TCP `port`, lossily as text.
pub(crate) fn http_response(port: u16, path: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    String::from_utf8_lossy(&response).into_owned()
}

impl Relay {
    /// Sends SIGTERM and waits for the exit.
    pub(crate) fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        wait(&mut child, PATIENCE).expect("the relay exits after SIGTERM")
    }
}

impl Relay {
    /// Sends SIGTERM (a drain) without waiting for the exit.
    pub(crate) fn signal_terminate(&self) {
        let child = self.child.as_ref().expect("running");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
    }

    /// Kills the relay with SIGKILL (a crash: no GOAWAY, no close) and waits for it.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The `moqx` binary: beside the relay's in the target directory, built if it is not there
/// yet (a `cargo test -p moqx-relay` alone does not build other packages' binaries).
pub(crate) fn moq_binary() -> PathBuf {
    let relay = PathBuf::from(env!("CARGO_BIN_EXE_moqx-relay"));
    let moq = relay.with_file_name("moqx");
    if !moq.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let built = Command::new(cargo)
            .args(["build", "-p", "moqx-cli", "--bin", "moqx"])
            .status()
            .expect("cargo runs");
        assert!(built.success(), "building the moqx CLI");
    }
    moq
}

/// A port free on loopback for both UDP (the relay) and TCP (its HTTP side).
pub(crate) fn free_port() -> u16 {
    loop {
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Waits for `child` to exit, up to `limit`.
pub(crate) fn wait(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `command` to completion (killed after PATIENCE), capturing its output.
pub(crate) fn finish(mut command: Command) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait(&mut child, PATIENCE);
    let output = child.wait_with_output().unwrap();
    assert!(
        status.is_some(),
        "timed out: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Publishes `lines` with `moqx publish --wait`, keeping stdin open: the track (one open
/// group) finishes only when the caller collects the publisher, after its readers have
/// everything. (Closing stdin at once raced a reader's SUBSCRIBE against the track's end:
/// `--wait` can be satisfied by the relay's TRACK query before its SUBSCRIBE arrives.)
pub(crate) fn publish(relay: &Relay, url: &str, path: &str, lines: &str) -> Child {
    let mut child = relay
        .moq(&[
            "publish", url, path, "--track", "t", "--wait", "--linger", "5",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.as_mut().unwrap();
    stdin.write_all(lines.as_bytes()).unwrap();
    stdin.flush().unwrap();
    child
}

/// Subscribes to `path` and returns what it printed once `count` frames arrived.
pub(crate) fn subscribe(relay: &Relay, url: &str, path: &str, count: usize) -> Child {
    relay
        .moq(&[
            "subscribe",
            url,
            path,
            "--track",
            "t",
            "--count",
            &count.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Closes the child's stdin (a publisher's end of input), waits for it, and returns
/// whether it succeeded, its stdout and its stderr.
pub(crate) fn collect(mut child: Child) -> (bool, String, String) {
    drop(child.stdin.take());
    let status = wait(&mut child, PATIENCE);
    let output = child.wait_with_output().unwrap();
    (
        status.is_some_and(|s| s.success()),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A token signed by `key` for `root`, expiring `expires_in` seconds from now (in the
/// past if negative).
pub(crate) fn token(
    key: &Key,
    root: &str,
    publish: &[&str],
    subscribe: &[&str],
    expires_in: i64,
) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let claims = Claims {
        root: root.into(),
        publish: publish.iter().map(|s| s.to_string()).collect(),
        subscribe: subscribe.iter().map(|s| s.to_string()).collect(),
        expires: Some((now + expires_in) as u64),
        issued: Some(now as u64),
        audience: vec![AUDIENCE.to_owned()],
        ..Claims::default()
    };
    key.sign(&claims).unwrap()
}

/// The audience the tests' relays require and [`token`] names.
pub(crate) const AUDIENCE: &str = "relay.test";

/// A token granting everything under `root`, for `audience`.
pub(crate) fn token_for(key: &Key, root: &str, audience: &str) -> String {
    let claims = Claims {
        root: root.into(),
        publish: vec![String::new()],
        subscribe: vec![String::new()],
        audience: vec![audience.to_owned()],
        ..Claims::default()
    };
    key.sign(&claims).unwrap()
}

/// `keys` as a JWK Set.
pub(crate) fn key_set(keys: &[&Key]) -> String {
    let keys: Vec<serde_json::Value> = keys
        .iter()
        .map(|key| serde_json::from_str(&key.to_json()).unwrap())
        .collect();
    serde_json::json!({ "keys": keys }).to_string()
}
