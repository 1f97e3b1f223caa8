//! Driving the chat page in a real headless Chromium (feature `browser`): the relay, the
//! `moqx` CLI and the chat example as real processes, Chromium through its WebDriver
//! (`chromedriver`, driven with fantoccini).
//!
//! The page is the one `cargo xtask web` builds (`moq-wasm/web/` plus the wasm-bindgen
//! output); `MOQ_WEB_ROOT` names its directory, which `cargo xtask browser` sets after
//! building it. Every wait is bounded by [`PATIENCE`] so that a broken page fails the test
//! instead of hanging it; nothing is timed.

use std::io::{BufRead, BufReader};
use std::net::{TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use serde_json::{Value, json};

/// A bound on every wait (never a performance threshold: everything here takes a fraction
/// of it on an idle machine, and a busy one must not fail).
pub const PATIENCE: Duration = Duration::from_secs(90);

/// The built page's directory, from `MOQ_WEB_ROOT`.
///
/// # Panics
///
/// If it is unset or not built, with what to run.
pub fn web_root() -> PathBuf {
    let root = std::env::var_os("MOQ_WEB_ROOT").map(PathBuf::from);
    match root {
        Some(root) if root.join("pkg").join("moqx_wasm_bg.wasm").exists() => root,
        _ => panic!(
            "the chat page is not built: run `cargo xtask browser` (which builds it and sets \
             MOQ_WEB_ROOT), or `cargo xtask web` and set MOQ_WEB_ROOT=target/web"
        ),
    }
}

/// A binary of this workspace in the target directory (`example` for an example), built if
/// it is not there yet; `release` picks the release build. The test build itself builds
/// the relay (it has integration tests); after changing the CLI, rebuild it (`cargo build
/// -p moqx-cli`), as a binary that is there is not rebuilt.
pub fn workspace_binary(package: &str, name: &str, example: bool, release: bool) -> PathBuf {
    let target = target_dir();
    let mut dir = target.join(if release { "release" } else { "debug" });
    if example {
        dir = dir.join("examples");
    }
    let path = dir.join(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let kind = if example { "--example" } else { "--bin" };
        let mut build = Command::new(cargo);
        build.args(["build", "-p", package, kind, name]);
        if release {
            build.arg("--release");
        }
        assert!(
            build.status().expect("cargo runs").success(),
            "building {name}"
        );
    }
    path
}

/// The workspace's target directory: where this test or program runs from.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the running executable");
    // target/<profile>/deps/<test> or target/<profile>/<bin>
    exe.ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == "target"))
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// A relay process serving the page, on a free loopback port.
#[derive(Debug)]
pub struct Relay {
    child: Child,
    port: u16,
    fingerprint: String,
    _scratch: tempfile::TempDir,
}

/// How a test relay starts, beyond the defaults.
#[derive(Debug, Default)]
pub struct RelayOptions {
    /// Its port (UDP and TCP); `None`: a free one.
    pub port: Option<u16>,
    /// Its certificate chain and key (PEM files); `None`: a self-signed one of its own.
    /// A relay restarted with the same files keeps its fingerprint, which pages pin.
    pub certificate: Option<(PathBuf, PathBuf)>,
    /// More arguments (`--drain 1`, say).
    pub args: Vec<String>,
}

impl Relay {
    /// Starts `binary` serving `web_root`, and waits until it listens.
    pub fn start(binary: &Path, web_root: &Path) -> Self {
        Self::start_with(binary, web_root, RelayOptions::default())
    }

    /// [`start`](Self::start), as `options` say.
    pub fn start_with(binary: &Path, web_root: &Path, options: RelayOptions) -> Self {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let fingerprint_file = scratch.path().join("fingerprint");
        let port = options.port.unwrap_or_else(free_port);
        let mut command = Command::new(binary);
        command
            .args(["--bind", &format!("127.0.0.1:{port}")])
            .arg("--web-root")
            .arg(web_root)
            .arg("--fingerprint-file")
            .arg(&fingerprint_file)
            .args(&options.args);
        if let Some((chain, key)) = &options.certificate {
            command
                .arg("--tls-cert")
                .arg(chain)
                .arg("--tls-key")
                .arg(key);
        }
        let mut child = command
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null())
            .spawn()
            .expect("the relay binary runs");
        let fingerprint = wait_for("the relay to listen", || {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the relay exited with {status} (its error is above)");
            }
            std::fs::read_to_string(&fingerprint_file)
                .ok()
                .filter(|text| !text.is_empty())
        });
        Self {
            child,
            port,
            fingerprint: fingerprint.trim().to_owned(),
            _scratch: scratch,
        }
    }

    /// Its port (UDP for QUIC, TCP for HTTP).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its certificate's fingerprint.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The chat page's URL with `query`.
    pub fn page_url(&self, query: &str) -> String {
        self.http_url(&format!("/?{query}"))
    }

    /// The URL of `path` (and query) on its HTTP side.
    pub fn http_url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// A raw-QUIC URL of `root` on it, for the CLI.
    pub fn moqt_url(&self, root: &str) -> String {
        format!("moqt://127.0.0.1:{}/{root}", self.port)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the process to exit (after [`terminate`](Self::terminate)).
    ///
    /// # Panics
    ///
    /// After [`PATIENCE`].
    pub fn wait_exit(&mut self) {
        wait_for("the relay to exit", || {
            matches!(self.child.try_wait(), Ok(Some(_))).then_some(())
        });
    }

    /// Sends it SIGTERM: it sends GOAWAY to every session, drains, and exits.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "SIGTERM was delivered");
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `chromedriver` process: each [`Page`] is a WebDriver session of its own, in a
/// Chromium of its own (so that no page is a background tab, whose timers are throttled).
#[derive(Debug)]
pub struct Chromium {
    driver: Child,
    port: u16,
}

impl Chromium {
    /// Starts `chromedriver` and waits until it listens.
    ///
    /// # Panics
    ///
    /// If it is not installed (`cargo xtask browser` installs it).
    pub fn start() -> Self {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "chromedriver does not run ({error}): install Debian's chromium and \
                     chromium-driver, or run `cargo xtask browser`, which does"
                )
            });
        wait_for("chromedriver to listen", || {
            TcpStream::connect(("127.0.0.1", port)).ok()
        });
        Self { driver, port }
    }

    /// A new headless Chromium window at `url`.
    pub async fn open(&self, url: &str) -> Page {
        let profile = tempfile::tempdir().expect("a profile directory");
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    // This machine has no internet: no background fetches to fail.
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--window-size=1000,760",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("chromedriver starts a Chromium session");
        client.goto(url).await.expect("the page loads");
        Page {
            client,
            _profile: profile,
        }
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// One Chromium window with the chat page (or the benchmark page) open.
#[derive(Debug)]
pub struct Page {
    client: Client,
    _profile: tempfile::TempDir,
}

impl Page {
    /// The value of a JavaScript expression (as JSON).
    pub async fn eval(&self, expression: &str) -> Value {
        self.client
            .execute(&format!("return {expression};"), vec![])
            .await
            .unwrap_or_else(|error| panic!("evaluating `{expression}` on the page: {error}"))
    }

    /// `window.chat`, the page's state (`status`, `error`, `people`, `received`).
    pub async fn chat(&self) -> Value {
        self.eval("window.chat ? JSON.parse(JSON.stringify(window.chat)) : null")
            .await
    }

    /// Waits until `condition` holds of the page's [`chat`](Self::chat) state; the state.
    ///
    /// # Panics
    ///
    /// After [`PATIENCE`], with the page's state and `what` it waited for.
    pub async fn wait_until(&self, what: &str, condition: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let state = self.chat().await;
            if condition(&state) {
                return state;
            }
            assert!(
                Instant::now() < deadline,
                "waited {PATIENCE:?} for {what}; the page's state: {state:#}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the page has joined its room.
    pub async fn wait_connected(&self) -> Value {
        self.wait_until("the page to connect", |state| {
            state["status"] == "connected" || state["status"] == "failed"
        })
        .await;
        let state = self.chat().await;
        assert_eq!(state["status"], "connected", "the page failed: {state:#}");
        state
    }

    /// Sends `text` from the page (as its send button does).
    pub async fn send(&self, text: &str) {
        self.client
            .execute("window.chat.send(arguments[0]);", vec![json!(text)])
            .await
            .unwrap_or_else(|error| panic!("sending {text:?} from the page: {error}"));
    }

    /// The messages the page received from `from`, in order.
    pub async fn received_from(&self, from: &str) -> Vec<String> {
        messages_from(&self.chat().await, from)
    }

    /// A PNG of the window.
    pub async fn screenshot(&self) -> Vec<u8> {
        self.client.screenshot().await.expect("a screenshot")
    }

    /// Closes the window (and its Chromium).
    pub async fn close(self) {
        let _ = self.client.close().await;
    }
}

/// The texts in a chat state's `received` that came from `from`, in order.
pub fn messages_from(state: &Value, from: &str) -> Vec<String> {
    state["received"]
        .as_array()
        .map(|received| {
            received
                .iter()
                .filter(|message| message["from"] == from)
                .filter_map(|message| message["text"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The lines a child process writes to stdout, as they come.
#[derive(Debug)]
pub struct Lines {
    receiver: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Lines {
    /// Reads `stdout` on a thread of its own.
    pub fn of(stdout: ChildStdout) -> Self {
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            receiver,
            seen: Vec::new(),
        }
    }

    /// Every line so far.
    pub fn seen(&mut self) -> &[String] {
        while let Ok(line) = self.receiver.try_recv() {
            self.seen.push(line);
        }
        &self.seen
    }
}

/// Polls `probe` until it gives a value, for at most [`PATIENCE`].
fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A port free on loopback for both UDP and TCP.
pub fn free_port() -> u16 {
    loop {
        let udp = UdpSocket::bind("127.0.0.1:0").expect("a UDP port");
        let port = udp.local_addr().expect("its address").port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// The `q`-quantile of `sorted` (ascending), by nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
