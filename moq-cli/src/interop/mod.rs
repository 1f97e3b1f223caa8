//! `moqx interop`: the test client of the IETF MoQ interop runner
//! (englishm/moq-interop-runner, `docs/TEST-CLIENT-INTERFACE.md`): its command line and
//! environment (`-r/--relay` or `RELAY_URL`, `-t/--test` or `TESTCASE`,
//! `--tls-disable-verify` or `TLS_DISABLE_VERIFY=1`, `-v` or `VERBOSE=1`), TAP version 14
//! on stdout, and exit codes 0 (all passed), 1 (one failed), 127 (a test this client does
//! not know).

mod cases;
mod peer;

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use moqx_net::coding::Version;
use moqx_runtime::tls::Fingerprint;
use moqx_tokio::ClientConfig;

use peer::Peer;

/// The interop test client's options.
#[derive(Debug, Args)]
pub(crate) struct InteropArgs {
    /// The relay: https://host:port/ (WebTransport) or moqt://host:port/ (raw QUIC)
    /// [env: RELAY_URL; default: https://localhost:4443].
    #[arg(short = 'r', long = "relay", value_name = "URL")]
    relay: Option<String>,
    /// Run this test case only (omit for all) [env: TESTCASE].
    #[arg(short = 't', long = "test", value_name = "NAME")]
    test: Option<String>,
    /// List the test cases and exit.
    #[arg(short = 'l', long)]
    list: bool,
    /// Print each case's steps on stderr [env: VERBOSE=1].
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Do not verify the relay's certificate [env: TLS_DISABLE_VERIFY=1].
    #[arg(long)]
    tls_disable_verify: bool,
    /// Trust exactly the relay certificate with this SHA-256 fingerprint (hex).
    #[arg(long, value_name = "HEX")]
    fingerprint: Option<String>,
    /// The moq-transport draft to speak: moqt-14, moqt-16 or moqt-18 [env: DRAFT;
    /// default: moqt-18, the draft the test cases are written against].
    #[arg(long, value_name = "VERSION")]
    draft: Option<String>,
}

/// Where the test cases connect, and how.
pub(crate) struct Target {
    url: String,
    version: Version,
    config: ClientConfig,
    verbose: bool,
}

impl Target {
    /// A new connection to the relay with SETUP exchanged, within `patience`.
    async fn connect(&self, patience: Duration) -> Result<Peer, String> {
        if self.verbose {
            let _ = writeln!(
                std::io::stderr(),
                "# connecting to {} on {}",
                self.url,
                self.version
            );
        }
        Peer::connect(&self.url, self.version, self.config.clone(), patience).await
    }
}

/// Runs the test client; its exit code as the contract says.
pub(crate) async fn run(args: InteropArgs) -> ExitCode {
    if args.list {
        for name in cases::ALL {
            let _ = writeln!(std::io::stdout(), "{name}");
        }
        return ExitCode::SUCCESS;
    }
    let env = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    let flag = |name: &str| env(name).is_some_and(|value| value == "1");
    let url = args
        .relay
        .or_else(|| env("RELAY_URL"))
        .unwrap_or_else(|| "https://localhost:4443".to_owned());
    let tests: Vec<String> = match args.test.or_else(|| env("TESTCASE")) {
        Some(name) if !cases::ALL.contains(&name.as_str()) => {
            let _ = writeln!(std::io::stdout(), "TAP version 14");
            let _ = writeln!(
                std::io::stdout(),
                "1..0 # SKIP test case {name:?} is not supported by this client"
            );
            return ExitCode::from(127);
        }
        Some(name) => vec![name],
        None => cases::ALL.iter().map(|name| (*name).to_owned()).collect(),
    };
    let draft = args.draft.or_else(|| env("DRAFT"));
    let version = match draft.as_deref().unwrap_or("moqt-18").parse::<Version>() {
        Ok(version) if !version.is_lite() => version,
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "moqx interop: --draft must be moqt-14, moqt-16 or moqt-18"
            );
            return ExitCode::from(127);
        }
    };
    let mut config = ClientConfig::default();
    config.insecure_skip_verify = args.tls_disable_verify || flag("TLS_DISABLE_VERIFY");
    if let Some(text) = &args.fingerprint {
        match Fingerprint::parse(text.trim()) {
            Some(fingerprint) => config.fingerprint = Some(fingerprint),
            None => {
                let _ = writeln!(
                    std::io::stderr(),
                    "moqx interop: --fingerprint: not a SHA-256 fingerprint (64 hex digits)"
                );
                return ExitCode::FAILURE;
            }
        }
    }
    let target = Target {
        url: url.clone(),
        version,
        config,
        verbose: args.verbose || flag("VERBOSE"),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "TAP version 14");
    let _ = writeln!(out, "# moqx interop {}", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(out, "# Relay: {}", moqx_net::redact::Redacted(&url));
    let _ = writeln!(out, "# Draft: {version}");
    let _ = writeln!(out, "1..{}", tests.len());
    let _ = out.flush();
    let mut failed = false;
    for (index, name) in tests.iter().enumerate() {
        let started = Instant::now();
        let outcome = cases::run(name, &target).await;
        let duration_ms = started.elapsed().as_millis();
        let number = index + 1;
        match outcome {
            Ok(()) => {
                let _ = writeln!(out, "ok {number} - {name}");
                let _ = writeln!(out, "  ---\n  duration_ms: {duration_ms}\n  ...");
            }
            Err(why) => {
                failed = true;
                let _ = writeln!(out, "not ok {number} - {name}");
                let why = why.replace('"', "'");
                let _ = writeln!(
                    out,
                    "  ---\n  duration_ms: {duration_ms}\n  message: \"{why}\"\n  ..."
                );
            }
        }
        let _ = out.flush();
    }
    match failed {
        true => ExitCode::FAILURE,
        false => ExitCode::SUCCESS,
    }
}
