//! The `moqx-relay` binary's process lifecycle (the binary's module, not the library's):
//! signals, reloads, the service manager's notifications and the log filter.
//!
//! - SIGHUP reloads: the configuration file is read again, the flags and environment
//!   applied on top as at startup, and [`RelayHandle::reload`] puts its reloadable parts in
//!   force; the log says what changed, and what waits for a restart. A file that does not
//!   parse or validate, or a key file that does not load, changes nothing and is logged.
//! - SIGTERM or SIGINT starts the drain; a second one exits at once (143 or 130, as a shell
//!   reports a process those signals ended).
//! - Under systemd (`Type=notify`), READY=1 is sent once the relay listens, RELOADING=1 and
//!   READY=1 around a reload, and STOPPING=1 when the drain begins; elsewhere nothing is.

use moqx_relay::{Config, RelayHandle};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::reload;
use tracing_subscriber::util::SubscriberInitExt;

/// Changes the log filter of the subscriber [`init_logging`] installed.
pub(crate) type LogFilter = reload::Handle<EnvFilter, tracing_subscriber::Registry>;

/// Installs the log subscriber: `RUST_LOG` if set, else `log.filter`, else `info`; text on
/// stderr, coloured only at a terminal.
pub(crate) fn init_logging(config: &Config) -> LogFilter {
    let filter = match rust_log() {
        Some(text) => EnvFilter::try_new(&text).unwrap_or_else(|_| EnvFilter::new("info")),
        None => configured_filter(config),
    };
    let (filter, handle) = reload::Layer::new(filter);
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                // Colors only for a person at a terminal, never into a log file or a pipe.
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
        )
        .init();
    handle
}

/// `RUST_LOG`, if set to something.
fn rust_log() -> Option<String> {
    std::env::var("RUST_LOG")
        .ok()
        .filter(|text| !text.is_empty())
}

/// `log.filter`, or `info` (validated with the configuration, so it parses).
fn configured_filter(config: &Config) -> EnvFilter {
    let text = config.log.filter.as_deref().unwrap_or("info");
    EnvFilter::try_new(text).unwrap_or_else(|_| EnvFilter::new("info"))
}

/// Writes the fingerprint of each certificate the relay puts in force to `path`.
pub(crate) async fn rewrite_fingerprint(handle: RelayHandle, path: std::path::PathBuf) {
    let mut fingerprints = handle.fingerprints();
    while fingerprints.changed().await.is_ok() {
        let fingerprint = *fingerprints.borrow_and_update();
        if let Err(error) = std::fs::write(&path, fingerprint.to_string()) {
            tracing::warn!(%error, path = %path.display(), "writing the new fingerprint");
        }
    }
}

/// Tells the service manager (systemd, `Type=notify`) that the relay is ready.
pub(crate) fn notify_ready() {
    notify(&[sd_notify::NotifyState::Ready]);
}

fn notify(states: &[sd_notify::NotifyState]) {
    if let Err(error) = sd_notify::notify(states) {
        tracing::warn!(%error, "telling the service manager (NOTIFY_SOCKET)");
    }
}

/// The relay's signals: SIGHUP reloads with `configure`, until SIGTERM or SIGINT; the
/// future completes then (the drain begins), and a task stays to exit the process on a
/// second one.
pub(crate) async fn until_stopped(
    handle: RelayHandle,
    log: LogFilter,
    configure: impl Fn() -> Result<Config, String>,
) {
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::error!("cannot listen for signals; stop the relay with SIGKILL");
        return std::future::pending().await;
    };
    loop {
        tokio::select! {
            _ = term.recv() => {
                tracing::info!("SIGTERM: draining (a second SIGTERM or SIGINT exits at once)");
                break;
            }
            _ = int.recv() => {
                tracing::info!("SIGINT: draining (a second SIGTERM or SIGINT exits at once)");
                break;
            }
            _ = hup.recv() => reload(&handle, &log, &configure).await,
        }
    }
    notify(&[sd_notify::NotifyState::Stopping]);
    tokio::spawn(exit_on_second(term, int));
}

/// Exits the process at the next SIGTERM or SIGINT, without waiting for the drain.
async fn exit_on_second(mut term: Signal, mut int: Signal) {
    let code = tokio::select! {
        _ = term.recv() => 143,
        _ = int.recv() => 130,
    };
    tracing::warn!(
        code,
        "a second signal: exiting without waiting for the drain"
    );
    std::process::exit(code);
}

/// Reads the configuration again and puts its reloadable parts in force.
async fn reload(
    handle: &RelayHandle,
    log: &LogFilter,
    configure: &impl Fn() -> Result<Config, String>,
) {
    tracing::info!("SIGHUP: reloading the configuration");
    // systemd 253 and later want the monotonic time with RELOADING=1.
    let mut reloading = vec![sd_notify::NotifyState::Reloading];
    reloading.extend(sd_notify::NotifyState::monotonic_usec_now().ok());
    notify(&reloading);
    let config = match configure() {
        Ok(config) => config,
        Err(error) => {
            tracing::error!(%error, "reload refused: the running configuration stays");
            notify_ready();
            return;
        }
    };
    handle.prefetch(&config).await;
    match handle.reload(&config) {
        Ok(reloaded) => {
            if reloaded.applied.iter().any(|key| key == "log.filter") {
                if rust_log().is_some() {
                    tracing::warn!("log.filter changed, but RUST_LOG is set and wins");
                } else if let Err(error) = log.reload(configured_filter(&config)) {
                    tracing::warn!(%error, "applying log.filter");
                }
            }
            tracing::info!(
                applied = ?reloaded.applied,
                keys = ?reloaded.keys,
                "reloaded: new clients get the new settings, sessions running keep theirs"
            );
            if !reloaded.need_restart.is_empty() {
                tracing::warn!(
                    keys = ?reloaded.need_restart,
                    "changed in the file, but in force only after a restart"
                );
            }
        }
        Err(error) => tracing::error!(%error, "reload refused: the running configuration stays"),
    }
    notify_ready();
}
