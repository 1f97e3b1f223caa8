//! The relay's configuration: a TOML file, overridden field by field from the command line.
//!
//! Every field has a default, so a relay runs with no file at all. A key the relay does
//! not know, or a value of the wrong type, is an error that names the key; so is a value
//! that parses but cannot work (zero sessions, a certificate without its key).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use moqx_net::coding::Version;
use moqx_runtime::quiche_config::CongestionControl;
use serde::{Deserialize, Serialize};

pub use crate::cluster::ClusterSection;
pub use auth::AuthSection;

mod auth;

/// Everything a relay is told.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Where it listens and how.
    pub server: ServerSection,
    /// Its certificate.
    pub tls: TlsSection,
    /// The HTTP side: metrics and the certificate fingerprint.
    pub http: HttpSection,
    /// Who may publish and subscribe to what.
    pub auth: AuthSection,
    /// What protects it from too much.
    pub limits: LimitsSection,
    /// How it stops.
    pub shutdown: ShutdownSection,
    /// The other relays it links with.
    pub cluster: ClusterSection,
    /// What it logs.
    pub log: LogSection,
    /// Tracing connections for debugging.
    pub debug: DebugSection,
}

/// `[debug]`: off unless set; read at start.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DebugSection {
    /// A directory for a qlog of each QUIC connection (quiche's JSON-SEQ, `.sqlog`, for
    /// qvis), created if missing.
    pub qlog_dir: Option<PathBuf>,
    /// The most qlog files kept: the oldest is deleted to make room for a new one.
    pub qlog_max_files: usize,
    /// The most bytes of one qlog file; the rest of the connection is not written.
    pub qlog_max_file_bytes: u64,
    /// A file the TLS secrets of every QUIC connection are appended to (NSS key log
    /// format, for Wireshark to decrypt a capture); the binary also takes
    /// `SSLKEYLOGFILE`. Anyone who reads it can decrypt the traffic: for debugging only.
    pub keylog_file: Option<PathBuf>,
}

impl Default for DebugSection {
    /// Nothing traced; 100 qlog files of at most 16 MiB once a directory is set.
    fn default() -> Self {
        Self {
            qlog_dir: None,
            qlog_max_files: 100,
            qlog_max_file_bytes: 16 << 20,
            keylog_file: None,
        }
    }
}

/// `[log]`
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LogSection {
    /// What is logged, as `RUST_LOG` takes it (`"info"`, `"info,moqx_net=debug"`);
    /// reloaded on SIGHUP. `RUST_LOG`, where set, wins. Unset: `"info"`.
    pub filter: Option<String>,
}

/// `[server]`
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSection {
    /// The UDP address for both bindings (raw QUIC and WebTransport).
    pub bind: SocketAddr,
    /// The driver that owns the sockets.
    pub driver: Driver,
    /// Worker threads of a thread-per-core driver, each pinned to a core with a socket of
    /// its own on the port; 0 for one per core the process may use. Ignored by `tokio`.
    pub workers: usize,
    /// Send batches of datagrams to one destination as one `sendmsg` (UDP GSO). Off only
    /// to measure it, or for a path that mangles it.
    pub gso: bool,
    /// Receive coalesced datagrams (UDP GRO). Off only to measure it.
    pub gro: bool,
    /// Datagrams one receive call takes at most (`recvmmsg`), 1 to 32; 1 turns receive
    /// batching off. The tokio drivers only: io_uring's multishot receive has no batch
    /// size.
    pub recv_batch: usize,
    /// The protocol versions it accepts, in its order of preference: by default the
    /// moq-lite versions `"moq-lite-05"`, `"moq-lite-04"`, `"moq-lite-03"`, then the IETF
    /// moq-transport drafts `"moqt-18"`, `"moqt-16"`, `"moqt-14"` (`"moq-lite-06-wip"`, a
    /// work in progress upstream, only if listed). A raw QUIC client gets the first of
    /// them it offers; a WebTransport client the first of its own list that is here.
    pub versions: Vec<String>,
    /// The congestion controller of every connection: `"cubic"` (the default), `"reno"`,
    /// or `"bbr2"`, the one that paces (its packets leave spread over a round trip, not
    /// in window-sized bursts that overflow a shallow router queue).
    pub congestion_control: String,
    /// A TCP address serving moq-lite over QMux on plain TCP (`tcp://`): no encryption
    /// and no certificate, so for trusted networks only (a sidecar, a private network
    /// between relays); off unless set. Clients are admitted, authorized and counted as
    /// every other.
    pub tcp_bind: Option<SocketAddr>,
}

impl Default for ServerSection {
    /// `[::]:4443` on the tokio driver; one worker per core for a thread-per-core driver;
    /// moq-lite-05, -04 and -03.
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([0u16; 8], 4443)),
            driver: Driver::Tokio,
            workers: 0,
            gso: true,
            gro: true,
            recv_batch: moqx_runtime::udp::RECV_BATCH,
            versions: Version::DEFAULT_OFFER
                .iter()
                .chain(Version::MOQT.iter().rev())
                .map(|version| version.name().to_owned())
                .collect(),
            congestion_control: CongestionControl::default().to_string(),
            tcp_bind: None,
        }
    }
}

impl ServerSection {
    /// The congestion controller named, or an error naming the key.
    pub fn parsed_congestion_control(&self) -> Result<CongestionControl, ConfigError> {
        self.congestion_control
            .parse()
            .map_err(|problem| ConfigError::Invalid {
                key: "server.congestion_control",
                problem,
            })
    }

    /// The accepted versions, parsed (as [`Config::validate`] checks them).
    pub fn parsed_versions(&self) -> Result<Vec<Version>, ConfigError> {
        let invalid = |problem: String| ConfigError::Invalid {
            key: "server.versions",
            problem,
        };
        if self.versions.is_empty() {
            return Err(invalid("must name at least one version".to_owned()));
        }
        let mut versions = Vec::with_capacity(self.versions.len());
        for text in &self.versions {
            let version = text
                .parse::<Version>()
                .map_err(|error| invalid(error.to_string()))?;
            if versions.contains(&version) {
                return Err(invalid(format!("{version} is listed twice")));
            }
            versions.push(version);
        }
        Ok(versions)
    }

    /// How many workers a thread-per-core driver runs: `workers`, or one per core the
    /// process may use.
    pub fn worker_count(&self) -> usize {
        match self.workers {
            0 => moqx_runtime::cores::available().len(),
            workers => workers,
        }
    }
}

/// Which driver runs the relay's sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Driver {
    /// tokio's work-stealing pool, one socket: portable.
    Tokio,
    /// tokio thread per core: a pinned current-thread runtime per worker, each with its
    /// own `SO_REUSEPORT` socket, packets steered to their connection's worker by the
    /// kernel. Linux.
    TokioPerCore,
    /// io_uring thread per core: a pinned worker per core with its own ring and
    /// `SO_REUSEPORT` socket, sends and receives batched in the ring (one system call per
    /// turn). Linux 6.12 or later, io_uring allowed (container runtimes forbid it by
    /// default); the relay refuses to start, saying what is missing, where it is not.
    Uring,
}

/// `[tls]`: PEM files, or nothing for a self-signed certificate.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TlsSection {
    /// The certificate chain, PEM, leaf first.
    pub cert: Option<PathBuf>,
    /// Its private key, PEM.
    pub key: Option<PathBuf>,
    /// The names a self-signed certificate is made for.
    pub names: Vec<String>,
    /// How long a self-signed certificate is valid, in seconds: at most 14 days (1209600),
    /// the most browsers accept for a pinned one. A new one is made a day (or a quarter
    /// of this, if shorter) before it expires.
    pub self_signed_validity_secs: u64,
}

impl TlsSection {
    /// `self_signed_validity_secs` as a duration.
    pub fn self_signed_validity(&self) -> Duration {
        Duration::from_secs(self.self_signed_validity_secs)
    }
}

impl Default for TlsSection {
    /// Self-signed for `localhost`, `127.0.0.1` and `::1`.
    fn default() -> Self {
        Self {
            cert: None,
            key: None,
            names: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            self_signed_validity_secs: moqx_runtime::tls::SELF_SIGNED_VALIDITY.as_secs(),
        }
    }
}

/// `[http]`
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSection {
    /// The TCP address serving `/metrics` and `/certificate.sha256`; `None` means the
    /// relay's own address and port (over TCP).
    pub bind: Option<SocketAddr>,
    /// Whether to serve HTTP at all.
    pub enabled: bool,
    /// Whether the HTTP port also serves moq-lite over QMux over WebSocket (`ws://`): for
    /// browsers without a working WebTransport (every Safari) and networks that block UDP.
    /// Same authorization (`?jwt=` in the URL) and limits as the QUIC bindings.
    pub websocket: bool,
    /// The most HTTP connections at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// The most of them from one IP address: one client cannot take every connection
    /// and lock others out of `/metrics` and `/certificate.sha256`.
    pub max_connections_per_address: usize,
    /// How long a client has to send a request's headers, in seconds.
    pub header_read_timeout_secs: u64,
    /// How long one HTTP connection may live, requests and idle time together, in seconds.
    pub connection_lifetime_secs: u64,
    /// A second TCP address, for operators: `/metrics`, `/health`, `/ready`, `/cluster`
    /// and `/debug/sessions` are served there, and the public port then serves only what
    /// clients need (`/certificate.sha256`, `/health`, `/ready`, WebSocket and TLS
    /// sessions, `web_root`). Unset: the public port serves them all but
    /// `/debug/sessions`.
    pub ops_bind: Option<SocketAddr>,
    /// A directory of static files served at `/` (a web page, such as the chat page
    /// `cargo xtask web` builds); `None` serves none.
    pub web_root: Option<PathBuf>,
}

impl Default for HttpSection {
    /// Enabled on the relay's own address and port, WebSocket clients served; 256
    /// connections, 16 from one address
    /// (a browser opens six to a host), 10 s for headers, 60 s per connection.
    fn default() -> Self {
        Self {
            bind: None,
            ops_bind: None,
            enabled: true,
            websocket: true,
            max_connections: 256,
            max_connections_per_address: 16,
            header_read_timeout_secs: 10,
            connection_lifetime_secs: 60,
            web_root: None,
        }
    }
}

/// `[limits]`
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsSection {
    /// The relay-wide memory budget, in bytes: payload of every group held (cached, queued
    /// for subscribers, being received) and announcements waiting for listeners. Past
    /// three quarters of it, caches keep only each track's newest group; at it, new
    /// subscriptions and received frames that do not fit are refused. Unset: half of the
    /// memory the process may use (the machine's, or its cgroup's limit if lower).
    pub max_memory_bytes: Option<u64>,
    /// The most established sessions at once (a raw-QUIC session is established at its
    /// authorized SETUP, a WebTransport one at its CONNECT); one more is refused.
    pub max_sessions: usize,
    /// The most subscriptions one session may hold; one more is refused on its stream.
    pub max_subscriptions_per_session: usize,
    /// The largest frame accepted from a publisher, in bytes; a larger one closes its
    /// session.
    pub max_frame_size: u64,
    /// Groups of each track kept for late joiners.
    pub cache_groups_per_track: usize,
    /// Payload bytes of each track kept for late joiners (the latest group is kept
    /// whatever its size); 0 for no byte bound.
    pub cache_bytes_per_track: u64,
    /// Closes a connection silent this long, in seconds.
    pub idle_timeout_secs: u64,
    /// The largest control message accepted from a client, in bytes; a larger one closes
    /// its session (BoundsExceeded). Bounds what one client can make the relay buffer.
    pub max_message_bytes: usize,
    /// The largest SETUP accepted, in bytes (read before the client is authorized; it
    /// carries the path and token).
    pub max_setup_bytes: usize,
    /// How long a client has to send its SETUP after connecting, in seconds, before its
    /// session is closed (Timeout).
    pub setup_timeout_secs: u64,
    /// The most announce streams one session may have open (each follows the relay's
    /// broadcasts under a prefix); one more is refused on its stream (BoundsExceeded).
    pub max_announce_requests_per_session: usize,
    /// The most broadcasts one session may publish at once; one more closes it
    /// (BoundsExceeded).
    pub max_announces_per_session: usize,
    /// The most bytes of path those broadcasts may hold together; past it the session
    /// closes (BoundsExceeded).
    pub max_announce_path_bytes_per_session: usize,
    /// The most groups kept for a subscriber that gives no stream credit; past it its
    /// oldest are dropped (counted in `groups_dropped_total`).
    pub max_queued_groups_per_session: usize,
    /// The most payload bytes of one group from a publisher; past it the group is refused
    /// on its stream (BoundsExceeded), the session going on.
    pub max_group_bytes: u64,
    /// The most frames of one group from a publisher, the same way.
    pub max_group_frames: u64,
    /// The most payload bytes in one session's unfinished groups together (a publisher
    /// may keep many group streams open at once); a frame past it refuses its group the
    /// same way.
    pub max_unfinished_group_bytes_per_session: u64,
    /// The most raw-QUIC connections waiting for their SETUP at once (they count against
    /// `max_sessions` only once their SETUP is authorized), and apart from them the most
    /// WebTransport connections waiting for their CONNECT; one more is refused.
    pub max_pending_setup: usize,
    /// The most QUIC handshakes in progress at once; a new one past it is dropped. Kept
    /// apart from `max_sessions`, so that a flood of handshakes cannot take the places of
    /// established sessions.
    pub max_half_open: usize,
    /// Past this many handshakes in progress, a new client must first prove its address
    /// with a QUIC Retry (one more round trip); 0 asks every client.
    pub retry_above_half_open: usize,
    /// The most established connections from one IP address (a new one from it is
    /// refused while it holds them); 0 for no cap (clients behind one NAT share an
    /// address: set it with that in mind).
    pub max_sessions_per_address: usize,
}

impl Default for LimitsSection {
    fn default() -> Self {
        Self {
            max_memory_bytes: None,
            max_sessions: 10_000,
            max_subscriptions_per_session: 1000,
            max_frame_size: 16 << 20,
            cache_groups_per_track: 32,
            cache_bytes_per_track: 4 << 20,
            idle_timeout_secs: 30,
            max_message_bytes: 64 << 10,
            max_setup_bytes: 16 << 10,
            setup_timeout_secs: 10,
            max_announce_requests_per_session: 16,
            max_announces_per_session: 1000,
            max_announce_path_bytes_per_session: 64 << 10,
            max_queued_groups_per_session: 1024,
            max_group_bytes: 64 << 20,
            max_group_frames: 65_536,
            max_unfinished_group_bytes_per_session: 256 << 20,
            max_pending_setup: 1024,
            max_half_open: 1024,
            retry_above_half_open: 256,
            max_sessions_per_address: 0,
        }
    }
}

impl LimitsSection {
    /// `max_memory_bytes`, or half of the memory the process may use by default.
    pub fn memory_budget_bytes(&self) -> u64 {
        self.max_memory_bytes
            .unwrap_or_else(|| usable_memory().map_or(DEFAULT_MEMORY_BUDGET, |bytes| bytes / 2))
    }
}

/// The budget when the machine's memory cannot be read.
const DEFAULT_MEMORY_BUDGET: u64 = 1 << 30;

/// The memory this process may use: the machine's (`MemTotal`), or its cgroup's
/// `memory.max` if that is lower. `None` where neither can be read (not Linux).
fn usable_memory() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|line| line.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            kib.checked_mul(1024)
        });
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok());
    match (total, cgroup) {
        (Some(total), Some(cgroup)) => Some(total.min(cgroup)),
        (total, cgroup) => total.or(cgroup),
    }
}

/// The smallest `limits.max_message_bytes` and `limits.max_setup_bytes` accepted.
const MIN_MESSAGE_BYTES: usize = 4096;

/// `[shutdown]`
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ShutdownSection {
    /// After SIGTERM or SIGINT and GOAWAY to every session, how long sessions may take to
    /// leave before the relay closes them and exits, in seconds.
    pub drain_secs: f64,
}

impl Default for ShutdownSection {
    fn default() -> Self {
        Self { drain_secs: 5.0 }
    }
}

/// A configuration that could not be read or would not work.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this configuration (an unknown key, a value of the
    /// wrong type); the message shows the line and names the key.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The TOML parser's message, with the offending line.
        message: String,
    },
    /// A value that parses but cannot work.
    #[error("`{key}`: {problem}")]
    Invalid {
        /// The key, as `section.field`.
        key: &'static str,
        /// What is wrong.
        problem: String,
    },
}

impl Config {
    /// Reads a configuration file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml(&text).map_err(|message| ConfigError::Parse {
            path: path.to_owned(),
            message,
        })
    }

    /// Parses a configuration from TOML text; the error is the parser's message.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|error| error.to_string().trim_end().to_owned())
    }

    /// Checks the values that parse but cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, problem: &str| {
            Err(ConfigError::Invalid {
                key,
                problem: problem.to_owned(),
            })
        };
        match (&self.tls.cert, &self.tls.key) {
            (Some(_), None) => return invalid("tls.key", "`tls.cert` is set, its key is not"),
            (None, Some(_)) => return invalid("tls.cert", "`tls.key` is set, its chain is not"),
            (None, None) if self.tls.names.is_empty() => {
                return invalid("tls.names", "a self-signed certificate needs a name");
            }
            _ => {}
        }
        let most = moqx_runtime::tls::SELF_SIGNED_VALIDITY.as_secs();
        if !(1..=most).contains(&self.tls.self_signed_validity_secs) {
            return invalid(
                "tls.self_signed_validity_secs",
                &format!("must be between 1 and {most} seconds (14 days)"),
            );
        }
        self.auth.validate()?;
        if self.debug.qlog_max_files == 0 {
            return invalid("debug.qlog_max_files", "must be at least 1");
        }
        if let Some(filter) = &self.log.filter
            && let Err(error) = tracing_subscriber::EnvFilter::try_new(filter)
        {
            return invalid("log.filter", &error.to_string());
        }
        if self.http.max_connections == 0 {
            return invalid("http.max_connections", "must be at least 1");
        }
        if self.http.max_connections_per_address == 0 {
            return invalid("http.max_connections_per_address", "must be at least 1");
        }
        if self.http.header_read_timeout_secs == 0 {
            return invalid("http.header_read_timeout_secs", "must be at least 1 second");
        }
        if self.http.connection_lifetime_secs == 0 {
            return invalid("http.connection_lifetime_secs", "must be at least 1 second");
        }
        if let Some(root) = &self.http.web_root
            && !root.is_dir()
        {
            return invalid(
                "http.web_root",
                &format!("{} is not a directory", root.display()),
            );
        }
        if self.server.workers > moqx_tokio::MAX_WORKERS {
            return invalid("server.workers", "must be at most 256 (0: one per core)");
        }
        self.server.parsed_versions()?;
        self.server.parsed_congestion_control()?;
        if !(1..=moqx_runtime::udp::RECV_BATCH).contains(&self.server.recv_batch) {
            return invalid(
                "server.recv_batch",
                &format!("must be between 1 and {}", moqx_runtime::udp::RECV_BATCH),
            );
        }
        if self.limits.max_sessions == 0 {
            return invalid("limits.max_sessions", "must be at least 1");
        }
        if self.limits.max_subscriptions_per_session == 0 {
            return invalid("limits.max_subscriptions_per_session", "must be at least 1");
        }
        if self.limits.max_frame_size == 0 {
            return invalid("limits.max_frame_size", "must be at least 1 byte");
        }
        if self.limits.max_memory_bytes == Some(0) {
            return invalid("limits.max_memory_bytes", "must be at least 1");
        }
        if self.limits.cache_groups_per_track == 0 {
            return invalid("limits.cache_groups_per_track", "must be at least 1");
        }
        if self.limits.idle_timeout_secs == 0 {
            return invalid("limits.idle_timeout_secs", "must be at least 1 second");
        }
        // Below these, well-formed messages of deployed peers (an announce of a 32-part
        // path, a SETUP with a token) no longer fit.
        if self.limits.max_message_bytes < MIN_MESSAGE_BYTES {
            return invalid("limits.max_message_bytes", "must be at least 4096 bytes");
        }
        if self.limits.max_setup_bytes < MIN_MESSAGE_BYTES {
            return invalid("limits.max_setup_bytes", "must be at least 4096 bytes");
        }
        if self.limits.setup_timeout_secs == 0 {
            return invalid("limits.setup_timeout_secs", "must be at least 1 second");
        }
        let at_least_one = [
            (
                "limits.max_announce_requests_per_session",
                self.limits.max_announce_requests_per_session as u64,
            ),
            (
                "limits.max_announces_per_session",
                self.limits.max_announces_per_session as u64,
            ),
            (
                "limits.max_queued_groups_per_session",
                self.limits.max_queued_groups_per_session as u64,
            ),
            ("limits.max_group_frames", self.limits.max_group_frames),
            ("limits.max_half_open", self.limits.max_half_open as u64),
            (
                "limits.max_pending_setup",
                self.limits.max_pending_setup as u64,
            ),
        ];
        if let Some((key, _)) = at_least_one.iter().find(|(_, value)| *value == 0) {
            return invalid(key, "must be at least 1");
        }
        // At least one long path must fit.
        if self.limits.max_announce_path_bytes_per_session < 1024 {
            return invalid(
                "limits.max_announce_path_bytes_per_session",
                "must be at least 1024 bytes",
            );
        }
        if self.limits.max_unfinished_group_bytes_per_session < self.limits.max_group_bytes {
            return invalid(
                "limits.max_unfinished_group_bytes_per_session",
                "must be at least limits.max_group_bytes",
            );
        }
        if self.limits.max_group_bytes < self.limits.max_frame_size {
            return invalid(
                "limits.max_group_bytes",
                "must be at least limits.max_frame_size (a group holds at least one frame)",
            );
        }
        self.cluster.validate()?;
        if !(self.shutdown.drain_secs.is_finite() && self.shutdown.drain_secs >= 0.0) {
            return invalid(
                "shutdown.drain_secs",
                "must be a number of seconds, 0 or more",
            );
        }
        Ok(())
    }

    /// The drain deadline as a duration.
    pub fn drain(&self) -> Duration {
        Duration::from_secs_f64(self.shutdown.drain_secs.max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_budget_is_the_configured_one_or_half_of_the_machine() {
        let mut limits = LimitsSection {
            max_memory_bytes: Some(123_456),
            ..LimitsSection::default()
        };
        assert_eq!(limits.memory_budget_bytes(), 123_456);
        limits.max_memory_bytes = None;
        let total = usable_memory().expect("Linux says how much memory there is");
        assert_eq!(limits.memory_budget_bytes(), total / 2);
        let mut config = Config::default();
        config.limits.max_memory_bytes = Some(0);
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("limits.max_memory_bytes"), "{error}");
    }

    #[test]
    fn no_file_means_the_defaults_and_the_defaults_are_valid() {
        let config = Config::from_toml("").unwrap();
        assert_eq!(config, Config::default());
        config.validate().unwrap();
        assert_eq!(
            config.auth.public_prefixes(),
            crate::auth::Public::both(&[String::new()]),
            "no key: everything is public"
        );
    }

    #[test]
    fn a_full_file_parses() {
        let config = Config::from_toml(
            r#"
            [server]
            bind = "127.0.0.1:5000"
            driver = "tokio-per-core"
            workers = 2
            [tls]
            names = ["relay.example"]
            [http]
            bind = "127.0.0.1:8080"
            [auth]
            key = "root.jwk"
            public = ["anon"]
            [limits]
            max_sessions = 10
            max_subscriptions_per_session = 5
            max_frame_size = 1000
            cache_groups_per_track = 4
            cache_bytes_per_track = 65536
            idle_timeout_secs = 10
            max_message_bytes = 8192
            max_setup_bytes = 4096
            [shutdown]
            drain_secs = 1.5
            "#,
        )
        .unwrap();
        config.validate().unwrap();
        assert_eq!(config.server.bind, "127.0.0.1:5000".parse().unwrap());
        assert_eq!(config.server.driver, Driver::TokioPerCore);
        assert_eq!(config.server.worker_count(), 2);
        assert_eq!(config.limits.max_sessions, 10);
        assert_eq!(config.limits.max_message_bytes, 8192);
        assert_eq!(
            config.auth.public_prefixes(),
            crate::auth::Public::both(&["anon".into()])
        );
        assert_eq!(config.drain(), Duration::from_millis(1500));
    }

    #[test]
    fn an_unknown_key_is_named() {
        let error = Config::from_toml("[limits]\nmax_sesions = 3\n").unwrap_err();
        assert!(error.contains("max_sesions"), "{error}");
        let error = Config::from_toml("[limit]\n").unwrap_err();
        assert!(error.contains("limit"), "{error}");
    }

    #[test]
    fn a_value_of_the_wrong_type_shows_its_key() {
        let error = Config::from_toml("[limits]\nmax_sessions = \"many\"\n").unwrap_err();
        assert!(error.contains("max_sessions"), "{error}");
        let error = Config::from_toml("[server]\ndriver = \"epoll\"\n").unwrap_err();
        assert!(error.contains("driver"), "{error}");
        let config = Config::from_toml("[server]\ndriver = \"uring\"\n").unwrap();
        assert_eq!(config.server.driver, Driver::Uring);
    }

    #[test]
    fn a_value_that_cannot_work_names_its_key() {
        let mut config = Config::default();
        config.limits.max_sessions = 0;
        let error = config.validate().unwrap_err().to_string();
        assert!(error.starts_with("`limits.max_sessions`"), "{error}");
        let mut config = Config::default();
        config.tls.cert = Some("chain.pem".into());
        let error = config.validate().unwrap_err().to_string();
        assert!(error.starts_with("`tls.key`"), "{error}");
        let mut config = Config::default();
        config.server.congestion_control = "bbr".into();
        let error = config.validate().unwrap_err().to_string();
        assert!(
            error.starts_with("`server.congestion_control`") && error.contains("bbr2"),
            "{error}"
        );
        for batch in [0, 33] {
            let mut config = Config::default();
            config.server.recv_batch = batch;
            let error = config.validate().unwrap_err().to_string();
            assert!(error.starts_with("`server.recv_batch`"), "{error}");
            assert!(error.contains("between 1 and 32"), "{error}");
        }
        let mut config = Config::default();
        config.http.web_root = Some("/no/such/page".into());
        let error = config.validate().unwrap_err().to_string();
        assert!(error.starts_with("`http.web_root`"), "{error}");
        assert!(
            error.contains("/no/such/page is not a directory"),
            "{error}"
        );
        let mut config = Config::default();
        config.http.web_root = Some(std::env::temp_dir());
        config.validate().unwrap();
    }

    /// The configurations packaging/ ships with the Dockerfile and the systemd unit.
    #[test]
    fn the_packaged_configurations_parse_and_validate() {
        for text in [
            include_str!("../../../packaging/docker/relay.toml"),
            include_str!("../../../packaging/systemd/relay.toml"),
        ] {
            let config = Config::from_toml(text).unwrap();
            config.validate().unwrap();
            assert!(config.http.ops_bind.is_some());
        }
    }

    #[test]
    fn the_example_file_parses_to_the_defaults() {
        let text = include_str!("../../relay.example.toml");
        assert_eq!(Config::from_toml(text).unwrap(), Config::default());
    }
}
