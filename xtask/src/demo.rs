//! `cargo xtask demo`: the first thing a newcomer runs. Builds the relay and the chat
//! example (release), starts the relay on loopback, runs a room of chat users through it
//! with a live progress line, prints what happened (deliveries, rate, latency, the relay's
//! CPU per message, its metrics), stops the relay with SIGTERM and checks it left cleanly.

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::time::{Duration, Instant};

use crate::cmd::{Failure, cargo};

/// The room: small enough for a 2-core machine, long enough to read the progress line.
const USERS: &str = "5";
const MESSAGES: &str = "200";
const RATE: &str = "20";

pub(crate) fn run(root: &Path, args: &[String]) -> Result<(), Failure> {
    if args.iter().any(|arg| arg == "--cluster") {
        return crate::demo_cluster::run(root);
    }
    crate::prerequisites::ensure()?;
    println!(
        "building the relay and the chat example (release; the first build takes a few minutes)"
    );
    build(root)?;
    let release = root.join("target").join("release");
    let port = free_port()?;
    let scratch = std::env::temp_dir().join(format!("moq-demo-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| Failure(format!("creating {scratch:?}: {e}")))?;
    let fingerprint_file = scratch.join("fingerprint");

    let mut relay = Relay::start(&release, port, &fingerprint_file)?;
    let fingerprint = relay.wait_ready(&fingerprint_file)?;
    println!(
        "relay listening on 127.0.0.1:{port} (raw QUIC and WebTransport), certificate {fingerprint}"
    );
    println!(
        "chat: {USERS} users, {MESSAGES} messages each at {RATE}/s, every user receiving everyone else's"
    );

    let cpu_before = relay.cpu_seconds()?;
    let chat = Process::new(release.join("examples").join("chat"))
        .args([
            "--fingerprint",
            &fingerprint,
            &format!("moqt://127.0.0.1:{port}/demo"),
            "--users",
            USERS,
            "--messages",
            MESSAGES,
            "--rate",
            RATE,
            "--progress",
            "--json",
        ])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Failure(format!("running the chat example: {e}")))?;
    let cpu = relay.cpu_seconds()? - cpu_before;
    let summary = String::from_utf8_lossy(&chat.stdout).into_owned();
    if !chat.status.success() {
        relay.stop()?;
        return Err(Failure(format!(
            "the chat example failed ({})",
            chat.status
        )));
    }
    let metrics = http_get(port, "/metrics").unwrap_or_default();
    let stopped = relay.stop()?;

    let number = |key: &str| json_number(&summary, key).unwrap_or(0.0);
    let delivered = number("delivered");
    println!("\n==> demo summary");
    println!(
        "  deliveries   {delivered:.0} of {:.0} ({:.0} lost) in {:.1} s, {:.0} messages/s",
        number("expected_deliveries"),
        number("lost"),
        number("seconds"),
        number("deliveries_per_second")
    );
    println!(
        "  latency      p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (send to receive, loopback)",
        number("p50"),
        number("p99"),
        number("max")
    );
    println!(
        "  relay CPU    {cpu:.2} s, {:.0} us per delivered message (presence hellos included in the work, not in the count)",
        cpu * 1e6 / delivered.max(1.0)
    );
    for name in [
        "frames_received_total",
        "frames_sent_total",
        "sessions_opened_total",
    ] {
        if let Some(value) = metric(&metrics, name) {
            println!("  relay metric moq_relay_{name} = {value}");
        }
    }
    println!("  relay        {stopped}");
    println!(
        "\nnext: `cargo run --release -p moqx-relay -- --help`, `cargo run --release -p moqx-cli -- --help`, examples/ (chat, clock, embedded_relay)"
    );
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

/// Builds the relay and the chat example (release).
pub(crate) fn build(root: &Path) -> Result<(), Failure> {
    cargo(
        root,
        &[
            "build",
            "--release",
            "-p",
            "moqx-relay",
            "-p",
            "moq-examples",
            "--bins",
            "--examples",
        ],
    )
    .run()
}

/// The relay process.
pub(crate) struct Relay {
    pub(crate) child: Child,
    pub(crate) port: u16,
}

impl Relay {
    fn start(release: &Path, port: u16, fingerprint_file: &Path) -> Result<Self, Failure> {
        Self::start_with(release, port, fingerprint_file, &[])
    }

    /// The relay with `extra` flags.
    pub(crate) fn start_with(
        release: &Path,
        port: u16,
        fingerprint_file: &Path,
        extra: &[String],
    ) -> Result<Self, Failure> {
        let _ = std::fs::remove_file(fingerprint_file);
        let child = Process::new(release.join("moqx-relay"))
            .args(["--bind", &format!("127.0.0.1:{port}"), "--drain", "2"])
            .arg("--fingerprint-file")
            .arg(fingerprint_file)
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Failure(format!("starting the relay: {e}")))?;
        Ok(Self { child, port })
    }

    /// Waits for the relay to write its fingerprint (it does once listening).
    pub(crate) fn wait_ready(&mut self, fingerprint_file: &Path) -> Result<String, Failure> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(text) = std::fs::read_to_string(fingerprint_file)
                && !text.trim().is_empty()
            {
                return Ok(text.trim().to_owned());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(Failure(format!("the relay exited at start ({status})")));
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return Err(Failure(format!(
                    "the relay did not start listening on port {} within 10 s",
                    self.port
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The relay's CPU time so far (user + system), from `/proc/<pid>/stat`.
    fn cpu_seconds(&self) -> Result<f64, Failure> {
        let path = PathBuf::from(format!("/proc/{}/stat", self.child.id()));
        let stat = std::fs::read_to_string(&path)
            .map_err(|e| Failure(format!("reading {}: {e}", path.display())))?;
        // Fields after the command name (which is in parentheses and may hold spaces).
        let rest = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after `)`.
        let ticks = |index: usize| fields.get(index).and_then(|f| f.parse::<f64>().ok());
        match (ticks(11), ticks(12)) {
            (Some(user), Some(system)) => Ok((user + system) / clock_ticks_per_second()),
            _ => Err(Failure(format!("unexpected {}: {stat}", path.display()))),
        }
    }

    /// SIGTERM, then waits for the exit; says how it went.
    pub(crate) fn stop(mut self) -> Result<String, Failure> {
        let pid = self.child.id().to_string();
        let signalled = Process::new("kill").args(["-TERM", &pid]).status();
        if !signalled.is_ok_and(|s| s.success()) {
            let _ = self.child.kill();
            return Err(Failure("could not send SIGTERM to the relay".into()));
        }
        let started = Instant::now();
        let deadline = started + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return if status.success() {
                    Ok(format!(
                        "stopped cleanly on SIGTERM in {:.1} s (GOAWAY, drain, exit 0)",
                        started.elapsed().as_secs_f64()
                    ))
                } else {
                    Err(Failure(format!(
                        "the relay exited with {status} on SIGTERM"
                    )))
                };
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return Err(Failure(
                    "the relay did not exit within 10 s of SIGTERM".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A UDP port free on loopback now (and, as the relay's HTTP side uses it too, over TCP).
pub(crate) fn free_port() -> Result<u16, Failure> {
    for _ in 0..20 {
        let udp =
            UdpSocket::bind("127.0.0.1:0").map_err(|e| Failure(format!("finding a port: {e}")))?;
        let port = udp.local_addr().map_err(|e| Failure(e.to_string()))?.port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(Failure(
        "no port free for both UDP and TCP on loopback".into(),
    ))
}

/// `getconf CLK_TCK`, or the usual 100.
fn clock_ticks_per_second() -> f64 {
    Process::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// A plain HTTP/1.0 GET on loopback; the body.
pub(crate) fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
}

/// The value of a Prometheus sample without labels.
fn metric(text: &str, name: &str) -> Option<String> {
    let prefix = format!("moq_relay_{name} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix).map(str::to_owned))
}

/// The number after `"key":` in a flat JSON text (the chat example's summary).
pub(crate) fn json_number(text: &str, key: &str) -> Option<f64> {
    let start = text.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = &text[start..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == 'e'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_from_the_chat_summary() {
        let summary = r#"{"delivered":60,"latency_ms":{"max":6.5,"p50":4.364},"seconds":0.51}"#;
        assert_eq!(json_number(summary, "delivered"), Some(60.0));
        assert_eq!(json_number(summary, "p50"), Some(4.364));
        assert_eq!(json_number(summary, "missing"), None);
    }

    #[test]
    fn an_unlabelled_metric_is_found() {
        let text = "# TYPE moq_relay_sessions gauge\nmoq_relay_sessions 3\nmoq_relay_sessions_opened_total 9\n";
        assert_eq!(metric(text, "sessions").as_deref(), Some("3"));
        assert_eq!(metric(text, "sessions_opened_total").as_deref(), Some("9"));
    }
}
