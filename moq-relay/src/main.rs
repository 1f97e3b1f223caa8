//! `moqx-relay`: the relay binary. `moqx-relay --help` says how to run it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand};
use moqx_relay::auth::{Claims, Key, KeyAlgorithm};
use moqx_relay::config::Driver;
use moqx_relay::{Config, Relay};

mod lifecycle;
mod probe;

/// A Media over QUIC relay: publishers and subscribers connect over raw QUIC
/// (moqt://host:port/path) or WebTransport (https://host:port/path), both on one UDP port,
/// and every broadcast published is relayed to everyone allowed to subscribe to it.
///
/// With no options it listens on [::]:4443 with a self-signed certificate (its SHA-256
/// fingerprint is printed, and served at http://host:4443/certificate.sha256 for browsers
/// to pin), lets anyone publish and subscribe, and serves Prometheus metrics at
/// http://host:4443/metrics and probes at /health and /ready (--ops-bind moves the
/// operator's routes to a port of their own). Set `auth.key` to require tokens (see
/// `moqx-relay token`).
///
/// Settings come from a TOML file (--config) and then from the flags, which win. The file
/// has sections [server], [tls], [http], [auth], [limits], [shutdown], [cluster], [log] and
/// [debug]; see moq-relay/relay.example.toml. Every flag can also be set by an environment
/// variable, MOQ_ and the flag's name (MOQ_BIND, MOQ_AUTH_KEY, MOQ_CLUSTER_CONNECT; lists
/// separated by commas); a flag given on the command line wins over its variable.
///
/// SIGTERM or SIGINT drains (GOAWAY, then up to shutdown.drain_secs) and exits; a second
/// one exits at once. SIGHUP reloads the configuration file's reloadable parts (auth,
/// limits for new sessions, the log filter) and logs what needs a restart.
#[derive(Debug, Parser)]
#[command(name = "moqx-relay", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the relay (the default when no command is given).
    Serve(Box<ServeArgs>),
    /// Makes a new key for signing tokens (JWK). For EdDSA, --public writes the
    /// verify-only half, which is all a relay needs.
    Key(KeyArgs),
    /// Signs a token granting publish and subscribe rights under a root path. The client
    /// adds it to its URL: moqt://relay:4443/ROOT?jwt=TOKEN.
    Token(TokenArgs),
    /// Asks a running relay's /health (or /ready) over HTTP and exits 0 if it answers 200:
    /// a container's health check.
    Health(HealthArgs),
}

#[derive(Debug, Args)]
struct HealthArgs {
    /// The relay's HTTP address (its port, or the ops listener's).
    #[arg(default_value = "127.0.0.1:4443")]
    address: String,
    /// Ask /ready (taking new clients) instead of /health (alive).
    #[arg(long)]
    ready: bool,
}

/// Flags override the file's values.
#[derive(Debug, Args, Default)]
struct ServeArgs {
    /// A TOML configuration file.
    #[arg(long, short, value_name = "FILE", env = "MOQ_CONFIG")]
    config: Option<PathBuf>,
    /// UDP address for both bindings [default: [::]:4443].
    #[arg(long, value_name = "ADDR", env = "MOQ_BIND")]
    bind: Option<SocketAddr>,
    /// The socket driver [default: tokio].
    #[arg(long, value_enum, env = "MOQ_DRIVER")]
    driver: Option<Driver>,
    /// Worker threads of a thread-per-core driver, 0 for one per core [default: 0].
    #[arg(long, value_name = "N", env = "MOQ_WORKERS")]
    workers: Option<usize>,
    /// Send one datagram per sendmsg (no UDP GSO): to measure GSO.
    #[arg(long, env = "MOQ_NO_GSO")]
    no_gso: bool,
    /// Receive datagrams uncoalesced (no UDP GRO): to measure GRO.
    #[arg(long, env = "MOQ_NO_GRO")]
    no_gro: bool,
    /// Datagrams one receive call takes at most, 1 to 32 (tokio drivers) [default: 32].
    #[arg(long, value_name = "N", env = "MOQ_RECV_BATCH")]
    recv_batch: Option<usize>,
    /// The congestion controller: cubic, reno, or bbr2 (paces) [default: cubic].
    #[arg(long, value_name = "NAME", env = "MOQ_CONGESTION_CONTROL")]
    congestion_control: Option<String>,
    /// A protocol version to accept (moq-lite-05, moq-lite-04, moq-lite-03,
    /// moq-lite-06-wip, moqt-18, moqt-16, moqt-14); repeat for several, in order of
    /// preference [default: moq-lite 05, 04, 03, then moqt 18, 16, 14].
    /// (`--version` prints the relay's own version.)
    #[arg(
        long = "moq-version",
        value_name = "VERSION",
        env = "MOQ_VERSION",
        value_delimiter = ','
    )]
    versions: Vec<String>,
    /// Certificate chain (PEM); with --tls-key, instead of a self-signed certificate.
    #[arg(long, value_name = "FILE", env = "MOQ_TLS_CERT")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", env = "MOQ_TLS_KEY")]
    tls_key: Option<PathBuf>,
    /// A name for the self-signed certificate (repeatable) [default: localhost, 127.0.0.1, ::1].
    #[arg(long, value_name = "NAME", env = "MOQ_TLS_NAME", value_delimiter = ',')]
    tls_name: Vec<String>,
    /// TCP address for /metrics and /certificate.sha256 [default: the UDP address].
    #[arg(long, value_name = "ADDR", env = "MOQ_HTTP_BIND")]
    http_bind: Option<SocketAddr>,
    /// A TCP address for operators: /metrics, /health, /ready, /cluster and
    /// /debug/sessions move there, off the public port.
    #[arg(long, value_name = "ADDR", env = "MOQ_OPS_BIND")]
    ops_bind: Option<SocketAddr>,
    /// A directory for a qlog of each QUIC connection (debug.qlog_dir); SSLKEYLOGFILE
    /// names a TLS key log (debug.keylog_file).
    #[arg(long, value_name = "DIR", env = "MOQ_QLOG_DIR")]
    qlog_dir: Option<PathBuf>,
    /// Serve no HTTP at all.
    #[arg(long, env = "MOQ_NO_HTTP")]
    no_http: bool,
    /// Serve no WebSocket clients (moq-lite over QMux, `ws://`) on the HTTP port.
    #[arg(long, env = "MOQ_NO_WEBSOCKET")]
    no_websocket: bool,
    /// Also serve moq-lite over QMux on plain TCP (`tcp://`) at this address: no
    /// encryption, for trusted networks only.
    #[arg(long, value_name = "ADDR", env = "MOQ_TCP_BIND")]
    tcp_bind: Option<SocketAddr>,
    /// A directory of static files to serve over HTTP at / (a web page).
    #[arg(long, value_name = "DIR", env = "MOQ_WEB_ROOT")]
    web_root: Option<PathBuf>,
    /// The keys tokens must be signed with: a JWK file, or a JWK Set of keys with ids
    /// (reread on SIGHUP); without one, everything is public.
    #[arg(long, value_name = "FILE", env = "MOQ_AUTH_KEY")]
    auth_key: Option<PathBuf>,
    /// A URL serving the JWK Set tokens are checked with (an identity provider's JWKS),
    /// instead of --auth-key: fetched at start, every auth.key_refresh_secs and on SIGHUP.
    #[arg(long, value_name = "URL", env = "MOQ_AUTH_KEY_URL")]
    auth_key_url: Option<String>,
    /// A path prefix anyone may use without a token (repeatable; "" for everything).
    #[arg(
        long,
        value_name = "PREFIX",
        env = "MOQ_AUTH_PUBLIC",
        value_delimiter = ','
    )]
    auth_public: Vec<String>,
    /// A path prefix anyone may subscribe to without a token (repeatable): anonymous
    /// viewers, with publishers still needing a token.
    #[arg(
        long,
        value_name = "PREFIX",
        env = "MOQ_AUTH_PUBLIC_SUBSCRIBE",
        value_delimiter = ','
    )]
    auth_public_subscribe: Vec<String>,
    /// A path prefix anyone may publish under without a token (repeatable).
    #[arg(
        long,
        value_name = "PREFIX",
        env = "MOQ_AUTH_PUBLIC_PUBLISH",
        value_delimiter = ','
    )]
    auth_public_publish: Vec<String>,
    /// An audience tokens must name in their `aud` claim (repeatable; any one of them).
    #[arg(
        long,
        value_name = "NAME",
        env = "MOQ_AUTH_AUDIENCE",
        value_delimiter = ','
    )]
    auth_audience: Vec<String>,
    /// The most sessions at once [default: 10000].
    #[arg(long, value_name = "N", env = "MOQ_MAX_SESSIONS")]
    max_sessions: Option<usize>,
    /// The most subscriptions per session [default: 1000].
    #[arg(long, value_name = "N", env = "MOQ_MAX_SUBSCRIPTIONS")]
    max_subscriptions: Option<usize>,
    /// The largest frame accepted, in bytes [default: 16777216].
    #[arg(long, value_name = "BYTES", env = "MOQ_MAX_FRAME_SIZE")]
    max_frame_size: Option<u64>,
    /// Groups cached per track for late joiners [default: 32].
    #[arg(long, value_name = "N", env = "MOQ_CACHE_GROUPS")]
    cache_groups: Option<usize>,
    /// Payload bytes cached per track, 0 for no byte bound [default: 4194304].
    #[arg(long, value_name = "BYTES", env = "MOQ_CACHE_BYTES")]
    cache_bytes: Option<u64>,
    /// The relay-wide memory budget in bytes (limits.max_memory_bytes) [default: half of
    /// the memory the process may use].
    #[arg(long, value_name = "BYTES", env = "MOQ_MAX_MEMORY_BYTES")]
    max_memory_bytes: Option<u64>,
    /// Seconds sessions get to leave after SIGTERM/SIGINT [default: 5].
    #[arg(long, value_name = "SECONDS", env = "MOQ_DRAIN")]
    drain: Option<f64>,
    /// Write the certificate's fingerprint to this file once listening (for scripts), and
    /// again each time the certificate is replaced.
    #[arg(long, value_name = "FILE", env = "MOQ_FINGERPRINT_FILE")]
    fingerprint_file: Option<PathBuf>,
    /// This relay's hop id in a cluster: non-zero, below 2^53 [default: random].
    #[arg(long, value_name = "ID", env = "MOQ_CLUSTER_ID")]
    cluster_id: Option<u64>,
    /// A peer relay to dial and keep linked, as a URL (moqt://host:port/ or https://…;
    /// ?cost=N prices its routes, ?fingerprint=HEX pins its certificate, ?jwt= is its
    /// token). Repeatable; the environment variable takes a comma-separated list.
    #[arg(
        long,
        value_name = "URL",
        env = "MOQ_CLUSTER_CONNECT",
        value_delimiter = ','
    )]
    cluster_connect: Vec<String>,
    /// A file holding the token presented to peers whose URL has none.
    #[arg(long, value_name = "FILE", env = "MOQ_CLUSTER_TOKEN")]
    cluster_token: Option<PathBuf>,
    /// Seconds of silence after which a peer link is dead [default: 2].
    #[arg(long, value_name = "SECONDS", env = "MOQ_CLUSTER_PEER_TIMEOUT")]
    cluster_peer_timeout: Option<f64>,
    /// Skip verifying peers' certificates (private networks of self-signed relays).
    #[arg(long, env = "MOQ_CLUSTER_INSECURE_SKIP_VERIFY")]
    cluster_insecure_skip_verify: bool,
    /// This relay's own URL as peers dial it (moqt://host:port/), advertised by gossip.
    #[arg(long, value_name = "URL", env = "MOQ_CLUSTER_NODE")]
    cluster_node: Option<String>,
    /// Gossip: advertise --cluster-node and dial the nodes advertised (needs
    /// --cluster-node).
    #[arg(long, env = "MOQ_CLUSTER_MESH")]
    cluster_mesh: bool,
    /// Seconds a broadcast whose last route was lost stays announced, for its publisher
    /// to come back [default: 5; 0: none].
    #[arg(long, value_name = "SECONDS", env = "MOQ_CLUSTER_LINGER")]
    cluster_linger: Option<f64>,
}

#[derive(Debug, Args)]
struct KeyArgs {
    /// The signing algorithm.
    #[arg(long, value_enum, default_value = "hs256")]
    algorithm: KeyAlgorithm,
    /// Where to write the key (it can sign: keep it secret).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// EdDSA only: where to write the verify-only key to give the relay.
    #[arg(long, value_name = "FILE")]
    public: Option<PathBuf>,
    /// The key's id (`kid`), named in the tokens it signs: a relay with several keys (a
    /// JWK Set, during a rotation) picks the key by it.
    #[arg(long, value_name = "ID")]
    id: Option<String>,
}

#[derive(Debug, Args)]
struct TokenArgs {
    /// The signing key (a JWK file with its private half).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// The path prefix the grants below are relative to; the client connects at or under it.
    #[arg(long, default_value = "")]
    root: String,
    /// A prefix (relative to --root) the holder may publish under (repeatable; "" for all).
    #[arg(long, value_name = "PREFIX")]
    publish: Vec<String>,
    /// A prefix (relative to --root) the holder may subscribe to (repeatable; "" for all).
    #[arg(long, value_name = "PREFIX")]
    subscribe: Vec<String>,
    /// Seconds until the token expires; 0 for never.
    #[arg(long, default_value_t = 86400)]
    expires_in: u64,
    /// The relay (or deployment) the token is for, its `aud` claim (repeatable); relays
    /// configured with `auth.audience` require it.
    #[arg(long, value_name = "NAME")]
    audience: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        None => serve(cli.serve),
        Some(Command::Serve(args)) => serve(*args),
        Some(Command::Key(args)) => key(args),
        Some(Command::Token(args)) => token(args),
        Some(Command::Health(args)) => {
            let path = if args.ready { "/ready" } else { "/health" };
            probe::probe(&args.address, path).map(|_| ())
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "moqx-relay: {message}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> Result<(), String> {
    let config = configure(&args)?;
    let log = lifecycle::init_logging(&config);
    // Thread per core: the sessions run on the pinned workers, so the accept loop and
    // HTTP need one thread, not a pool competing with them for the cores.
    let runtime = match config.server.driver {
        Driver::Tokio => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
        Driver::TokioPerCore | Driver::Uring => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
    }
    .map_err(|e| format!("starting tokio: {e}"))?;
    runtime.block_on(async {
        let relay = Relay::bind(&config).await.map_err(|e| e.to_string())?;
        let fingerprint = relay.fingerprint();
        tracing::info!(
            udp = %relay.local_addr(),
            http = ?relay.http_addr(),
            %fingerprint,
            "relay listening (raw QUIC and WebTransport)"
        );
        if let Some(path) = &args.fingerprint_file {
            std::fs::write(path, fingerprint.to_string())
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
            tokio::spawn(lifecycle::rewrite_fingerprint(relay.handle(), path.clone()));
        }
        lifecycle::notify_ready();
        let stopped = lifecycle::until_stopped(relay.handle(), log, || configure(&args));
        relay
            .run(stopped)
            .await
            .map_err(|failed| failed.to_string())?;
        tracing::info!("stopped");
        Ok(())
    })
}

/// The file's configuration with the flags applied on top.
fn configure(args: &ServeArgs) -> Result<Config, String> {
    let mut config = match &args.config {
        Some(path) => Config::from_file(path).map_err(|e| e.to_string())?,
        None => Config::default(),
    };
    if let Some(bind) = args.bind {
        config.server.bind = bind;
    }
    if let Some(driver) = args.driver {
        config.server.driver = driver;
    }
    if let Some(workers) = args.workers {
        config.server.workers = workers;
    }
    if args.no_gso {
        config.server.gso = false;
    }
    if args.no_gro {
        config.server.gro = false;
    }
    if !args.versions.is_empty() {
        config.server.versions = args.versions.clone();
    }
    if let Some(name) = &args.congestion_control {
        config.server.congestion_control.clone_from(name);
    }
    if let Some(batch) = args.recv_batch {
        config.server.recv_batch = batch;
    }
    if args.tls_cert.is_some() {
        config.tls.cert = args.tls_cert.clone();
    }
    if args.tls_key.is_some() {
        config.tls.key = args.tls_key.clone();
    }
    if !args.tls_name.is_empty() {
        config.tls.names = args.tls_name.clone();
    }
    if args.http_bind.is_some() {
        config.http.bind = args.http_bind;
    }
    if args.ops_bind.is_some() {
        config.http.ops_bind = args.ops_bind;
    }
    if args.qlog_dir.is_some() {
        config.debug.qlog_dir = args.qlog_dir.clone();
    }
    if let Some(path) = std::env::var_os("SSLKEYLOGFILE").filter(|path| !path.is_empty()) {
        config.debug.keylog_file = Some(path.into());
    }
    if args.no_websocket {
        config.http.websocket = false;
    }
    if args.tcp_bind.is_some() {
        config.server.tcp_bind = args.tcp_bind;
    }
    if args.no_http {
        config.http.enabled = false;
    }
    if args.web_root.is_some() {
        config.http.web_root = args.web_root.clone();
    }
    if args.auth_key.is_some() {
        config.auth.key = args.auth_key.clone();
    }
    if args.auth_key_url.is_some() {
        config.auth.key_url = args.auth_key_url.clone();
    }
    if !args.auth_public.is_empty() {
        config.auth.public = Some(args.auth_public.clone());
    }
    if !args.auth_public_subscribe.is_empty() {
        config.auth.public_subscribe = args.auth_public_subscribe.clone();
    }
    if !args.auth_public_publish.is_empty() {
        config.auth.public_publish = args.auth_public_publish.clone();
    }
    if !args.auth_audience.is_empty() {
        config.auth.audience = args.auth_audience.clone();
    }
    if let Some(n) = args.max_sessions {
        config.limits.max_sessions = n;
    }
    if let Some(n) = args.max_subscriptions {
        config.limits.max_subscriptions_per_session = n;
    }
    if let Some(n) = args.max_frame_size {
        config.limits.max_frame_size = n;
    }
    if let Some(n) = args.cache_groups {
        config.limits.cache_groups_per_track = n;
    }
    if let Some(bytes) = args.cache_bytes {
        config.limits.cache_bytes_per_track = bytes;
    }
    if let Some(bytes) = args.max_memory_bytes {
        config.limits.max_memory_bytes = Some(bytes);
    }
    if let Some(seconds) = args.drain {
        config.shutdown.drain_secs = seconds;
    }
    if args.cluster_id.is_some() {
        config.cluster.id = args.cluster_id;
    }
    if !args.cluster_connect.is_empty() {
        config.cluster.connect = args.cluster_connect.clone();
    }
    if args.cluster_token.is_some() {
        config.cluster.token = args.cluster_token.clone();
    }
    if let Some(seconds) = args.cluster_peer_timeout {
        config.cluster.peer_timeout_secs = seconds;
    }
    if args.cluster_insecure_skip_verify {
        config.cluster.insecure_skip_verify = true;
    }
    if args.cluster_node.is_some() {
        config.cluster.node = args.cluster_node.clone();
    }
    if args.cluster_mesh {
        config.cluster.mesh = true;
    }
    if let Some(seconds) = args.cluster_linger {
        config.cluster.linger_secs = seconds;
    }
    config.validate().map_err(|e| e.to_string())?;
    Ok(config)
}

fn key(args: KeyArgs) -> Result<(), String> {
    let mut key = Key::generate(args.algorithm).map_err(|e| e.to_string())?;
    if let Some(id) = args.id {
        key = key.with_id(id);
    }
    write_secret(&args.out, &key.to_json())?;
    if let Some(path) = &args.public {
        let public = key
            .public_json()
            .ok_or("--public: an HMAC key has no public half; give the relay the key itself")?;
        std::fs::write(path, public).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Writes a file only its owner can read.
fn write_secret(path: &std::path::Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

fn token(args: TokenArgs) -> Result<(), String> {
    if args.publish.is_empty() && args.subscribe.is_empty() {
        return Err("a token needs at least one --publish or --subscribe".into());
    }
    let key = Key::from_file(&args.key).map_err(|e| e.to_string())?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    let claims = Claims {
        root: args.root,
        publish: args.publish,
        subscribe: args.subscribe,
        expires: (args.expires_in > 0).then(|| now + args.expires_in),
        issued: Some(now),
        not_before: None,
        audience: args.audience,
    };
    let token = key.sign(&claims).map_err(|e| e.to_string())?;
    #[allow(clippy::print_stdout)]
    {
        println!("{token}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Containers are configured by environment: every flag of `serve` has a variable.
    #[test]
    fn every_serve_flag_has_an_environment_variable() {
        let command = super::Cli::command();
        let serve = command.find_subcommand("serve").unwrap();
        for arg in serve.get_arguments() {
            let name = arg.get_id().as_str();
            if matches!(name, "help" | "version") {
                continue;
            }
            let env = arg
                .get_env()
                .unwrap_or_else(|| panic!("--{name} has no variable"));
            let env = env.to_str().unwrap();
            assert!(env.starts_with("MOQ_"), "--{name}: {env}");
        }
    }

    /// clap checks a command line's definition only when it is built: a flag defined
    /// twice (ours and clap's own `--version`) would panic at the first run.
    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
