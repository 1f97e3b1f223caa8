//! Connecting: the options every command shares, and what a session's end means.

use std::path::PathBuf;

use clap::Args;
use moqx_net::Error;
use moqx_net::coding::Version;
use moqx_net::session::{Session, SessionConfig};
use moqx_runtime::client::ConnectError;
use moqx_runtime::tls::Fingerprint;
use moqx_tokio::ClientConfig;

/// How to reach the relay.
#[derive(Debug, Args)]
pub(crate) struct Connection {
    /// moqt://host:port/root (raw QUIC), https://host:port/root (WebTransport),
    /// ws://host:port/root (QMux over a WebSocket, where UDP is blocked) or
    /// tcp://host:port/root (QMux over plain TCP, trusted networks only); add ?jwt=TOKEN
    /// for a relay that wants one.
    pub(crate) url: String,
    /// Trust exactly the relay certificate with this SHA-256 fingerprint (hex).
    #[arg(long, value_name = "HEX")]
    fingerprint: Option<String>,
    /// Read the fingerprint to trust from a file (as `moqx-relay --fingerprint-file` writes).
    #[arg(long, value_name = "FILE", conflicts_with = "fingerprint")]
    fingerprint_file: Option<PathBuf>,
    /// Do not verify the relay's certificate at all (loopback testing only).
    #[arg(long, conflicts_with_all = ["fingerprint", "fingerprint_file"])]
    insecure: bool,
    /// Speak only this protocol version (moq-lite-05, moq-lite-04, moq-lite-03,
    /// moq-lite-06-wip, or 05, 04, …; or an IETF moq-transport draft: moqt-18, moqt-16,
    /// moqt-14); repeat to offer several, in order of preference [default: moq-lite 05,
    /// 04, 03; the relay picks].
    #[arg(long = "version", value_name = "VERSION")]
    versions: Vec<Version>,
    /// Keep the session up: when the relay goes away (GOAWAY, shutdown) or the connection
    /// is lost, connect again (to the relay the GOAWAY names, else the next of the URL and
    /// the --fallback relays), with backoff, carrying the broadcast and subscription over.
    #[arg(long)]
    pub(crate) reconnect: bool,
    /// Another relay to move to with --reconnect (repeatable; tried in order after URL).
    #[arg(long, value_name = "URL", requires = "reconnect")]
    fallback: Vec<String>,
}

impl Connection {
    /// The client configuration for `session`.
    fn config(&self, session: SessionConfig) -> Result<ClientConfig, String> {
        let fingerprint = match (&self.fingerprint, &self.fingerprint_file) {
            (Some(text), _) => Some(parse_fingerprint(text)?),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("reading {}: {e}", path.display()))?;
                Some(parse_fingerprint(&text)?)
            }
            (None, None) => None,
        };
        Ok({
            let mut client_config = ClientConfig::default();
            client_config.session = session;
            client_config.versions = match self.versions.is_empty() {
                true => Version::DEFAULT_OFFER.to_vec(),
                false => self.versions.clone(),
            };
            client_config.insecure_skip_verify = self.insecure;
            client_config.fingerprint = fingerprint;
            client_config
        })
    }

    /// With --reconnect: a session kept up over the URL and the fallbacks, once the first
    /// one is up.
    pub(crate) async fn keep_connected(
        &self,
        session: SessionConfig,
    ) -> Result<moqx_tokio::Reconnect, String> {
        let config = self.config(session)?;
        let mut urls = vec![self.url.clone()];
        urls.extend(self.fallback.iter().cloned());
        let reconnect = moqx_tokio::Reconnect::new(urls, config);
        reconnect
            .connected()
            .await
            .ok_or("the session closed before it started")?;
        Ok(reconnect)
    }

    /// Connects with `session` as the session's configuration.
    pub(crate) async fn connect(&self, session: SessionConfig) -> Result<Session, String> {
        let config = self.config(session)?;
        // Resolves once the relay answered SETUP: a relay checking tokens does that only
        // after letting this session in, and a refusal is an error with its code.
        moqx_tokio::connect(&self.url, config)
            .await
            .map_err(|error| match error {
                moqx_tokio::Error::Connect(ConnectError::Refused { error }) => {
                    ended(error).err().unwrap_or_else(|| {
                        format!("the relay closed the session before it started ({error})")
                    })
                }
                other => {
                    let url = moqx_net::redact::Redacted(&self.url);
                    format!("connecting to {url}: {other}")
                }
            })
    }
}

fn parse_fingerprint(text: &str) -> Result<Fingerprint, String> {
    Fingerprint::parse(text.trim()).ok_or_else(|| {
        format!(
            "{:?} is not a SHA-256 fingerprint (64 hex digits)",
            text.trim()
        )
    })
}

/// What a session's end means for a command: a relay closing normally (after GOAWAY, on
/// shutdown) is a clean end; anything else is an error to report.
pub(crate) fn ended(error: Error) -> Result<(), String> {
    match error {
        Error::Cancel | Error::Closed => Ok(()),
        Error::Unauthorized => Err("the relay refused this session: unauthorized (check the URL's path and its ?jwt= token)".into()),
        other => Err(format!("the session ended: {other} (code {})", other.to_code())),
    }
}

/// Closes the session normally and waits until the close is on its way to the relay, so
/// that it learns at once rather than after an idle timeout.
pub(crate) async fn close(session: &Session) {
    session.close(Error::Cancel);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), session.closed()).await;
}
