//! What the examples share: connecting to a relay from the command line, and latency
//! statistics. The examples themselves are `chat.rs`, `clock.rs` and `embedded_relay.rs`:
//!
//! ```text
//! cargo run -p moqx-relay                                  # a relay on [::]:4443
//! cargo run -p moq-examples --example chat -- --insecure moqt://localhost:4443/room
//! cargo run -p moq-examples --example clock -- --insecure moqt://localhost:4443/ publish
//! cargo run -p moq-examples --example embedded_relay
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

use moqx_net::session::{Session, SessionConfig};
use moqx_runtime::tls::Fingerprint;
use moqx_tokio::ClientConfig;

/// How an example reaches its relay.
#[derive(Debug, Clone, clap::Args)]
pub struct RelayArgs {
    /// The relay: moqt://host:port/root (raw QUIC) or https://host:port/root (WebTransport).
    pub url: String,
    /// Trust exactly the relay certificate with this SHA-256 fingerprint (hex).
    #[arg(long, value_name = "HEX")]
    pub fingerprint: Option<String>,
    /// Do not verify the relay's certificate (loopback testing only).
    #[arg(long, conflicts_with = "fingerprint")]
    pub insecure: bool,
}

impl RelayArgs {
    /// Connects with `session` as the session's configuration.
    pub async fn connect(&self, session: SessionConfig) -> Result<Session, String> {
        self.connect_to(&self.url, session).await
    }

    /// Connects to `url` (another relay of the same network, trusted the same way).
    pub async fn connect_to(&self, url: &str, session: SessionConfig) -> Result<Session, String> {
        moqx_tokio::connect(url, self.client_config(session)?)
            .await
            .map_err(|error| {
                let url = moqx_net::redact::Redacted(url);
                format!("connecting to {url}: {error}")
            })
    }

    /// The client configuration these arguments make, for `session`.
    pub fn client_config(&self, session: SessionConfig) -> Result<ClientConfig, String> {
        let fingerprint = match &self.fingerprint {
            Some(text) => Some(
                Fingerprint::parse(text)
                    .ok_or_else(|| format!("{text:?} is not a SHA-256 fingerprint"))?,
            ),
            None => None,
        };
        Ok({
            let mut client_config = ClientConfig::default();
            client_config.session = session;
            client_config.insecure_skip_verify = self.insecure;
            client_config.fingerprint = fingerprint;
            client_config
        })
    }
}

/// Microseconds since the Unix epoch: the timestamp a frame carries so that its reader can
/// tell how long it took to arrive (both ends on one machine, or clocks in sync).
pub fn now_micros() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
}

/// The `q`-quantile (0.0 to 1.0, nearest rank) of `sorted`, which must be sorted; `None`
/// when it is empty.
pub fn quantile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.saturating_sub(1)).copied()
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn quantiles_are_nearest_rank() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&values, 0.5), Some(50));
        assert_eq!(quantile(&values, 0.99), Some(99));
        assert_eq!(quantile(&values, 1.0), Some(100));
        assert_eq!(quantile(&values, 0.0), Some(1));
        assert_eq!(quantile(&[7], 0.99), Some(7));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
