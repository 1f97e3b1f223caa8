//! Reloading a running relay's configuration: what changed, what took effect, and what
//! waits for a restart.
//!
//! The reloadable parts are the ones the gatekeeper reads per client: `[auth]` (its key
//! file read again even when its path is unchanged, so a rotation needs no edit of the
//! configuration), the limits each new session starts with, `limits.max_sessions` and
//! `max_pending_setup`, `shutdown.drain_secs`, and `log.filter` (applied by whoever owns the
//! log subscriber: the binary). Everything else (addresses, the driver, the certificate
//! settings, transport limits, the cluster) is reported as needing a restart, and the
//! running value stays. The certificate files are read again too (their paths stay).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use moqx_net::session::SessionConfig;

use crate::config::{Config, ConfigError};
use crate::gatekeeper::Gatekeeper;
use crate::policy::Policy;

/// The keys a reload applies (a key, or every key of a section ending in `.`), but those
/// in [`NEEDS_RESTART`].
const RELOADABLE: &[&str] = &["auth.", "limits.", "shutdown.drain_secs", "log.filter"];

/// The limits a running relay cannot change ([`reloadable_limits`] keeps them).
const NEEDS_RESTART: &[&str] = &[
    "limits.max_memory_bytes",
    "limits.idle_timeout_secs",
    "limits.max_half_open",
    "limits.retry_above_half_open",
    "limits.max_sessions_per_address",
];

/// A handle on a running relay for what may change while it runs: cloned freely, and
/// usable from any thread.
#[derive(Debug, Clone)]
pub struct RelayHandle {
    pub(crate) gatekeeper: Arc<Gatekeeper>,
    /// The certificate in force, and who hears of its changes.
    pub(crate) certificates: crate::certificate_watch::CertificateFeed,
    /// What a session starts from apart from the reloadable limits (memory budget, hop
    /// id).
    pub(crate) base: SessionConfig,
    /// The configuration in force.
    pub(crate) applied: Arc<Mutex<Config>>,
    /// The JWK Set last fetched from `auth.key_url`.
    pub(crate) fetched_keys: Arc<Mutex<Option<String>>>,
    /// Bumped by each reload that took effect: the key source follows the configuration.
    pub(crate) reloads: Arc<tokio::sync::watch::Sender<u64>>,
}

/// What a reload did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reloaded {
    /// The keys whose new values are in force (`auth.public_subscribe`, ...).
    pub applied: Vec<String>,
    /// The keys that changed but keep their running value until a restart.
    pub need_restart: Vec<String>,
    /// The verifying keys now in force, by id (`None` for a key without one).
    pub keys: Vec<Option<String>>,
}

/// Why a reload changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The new configuration does not work.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The new key file could not be read or used.
    #[error("auth.key: {0}")]
    Auth(#[from] crate::auth::AuthError),
}

impl RelayHandle {
    /// Puts `config`'s reloadable parts in force for the clients that come from now on
    /// (sessions running keep what they began with), reading the key file again. A
    /// configuration that does not validate, or a key file that does not load, changes
    /// nothing and says why.
    pub fn reload(&self, config: &Config) -> Result<Reloaded, ReloadError> {
        config.validate()?;
        let mut applied = self
            .applied
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // What stays as it runs: the new file's values for what needs a restart are
        // reported, not used.
        let mut next = applied.clone();
        next.auth = config.auth.clone();
        next.limits = reloadable_limits(&applied, config);
        next.shutdown = config.shutdown.clone();
        next.log = config.log.clone();
        let policy = Policy::new(&next, &self.base, self.fetched_keys().as_deref())?;
        // The certificate files at the paths in force (a new path needs a restart), read
        // again where their directory could not be watched; a pair that does not load is
        // logged and the certificate in force stays.
        let _ = self.certificates.reload_files(&applied.tls);
        let keys = policy
            .authorizer
            .keys()
            .ids()
            .into_iter()
            .map(|id| id.map(str::to_owned))
            .collect();
        self.gatekeeper.set_policy(policy);
        let (applied_keys, need_restart) = changed_keys(&applied, config)
            .into_iter()
            .partition(|key| is_reloadable(key));
        *applied = next;
        self.reloads.send_modify(|count| *count += 1);
        Ok(Reloaded {
            applied: applied_keys,
            need_restart,
            keys,
        })
    }

    /// Fetches what a reload of `config` needs beforehand: the JWK Set at `auth.key_url`,
    /// if it names one. A fetch that fails is logged, and the reload uses the set fetched
    /// before (or fails, if there is none).
    pub async fn prefetch(&self, config: &Config) {
        if let Some(url) = &config.auth.key_url {
            match crate::jwks_fetch::fetch(url).await {
                Ok(text) => *self.lock_fetched() = Some(text),
                Err(error) => tracing::warn!(%error, "fetching auth.key_url"),
            }
        }
    }

    /// Puts a JWK Set fetched from `auth.key_url` in force, if it differs from the last.
    pub(crate) fn set_fetched_keys(&self, text: String) {
        {
            let mut fetched = self.lock_fetched();
            if fetched.as_deref() == Some(text.as_str()) {
                return;
            }
            *fetched = Some(text);
        }
        self.refresh_keys();
    }

    /// Rebuilds the policy in force with its keys read again (the key file, or the set last
    /// fetched); keys that do not load are logged and the ones in force stay.
    pub(crate) fn refresh_keys(&self) {
        let applied = self.config();
        match Policy::new(&applied, &self.base, self.fetched_keys().as_deref()) {
            Ok(policy) => {
                let keys = policy.authorizer.keys().ids();
                tracing::info!(?keys, "the token keys were read again");
                self.gatekeeper.set_policy(policy);
            }
            Err(error) => {
                tracing::warn!(%error, "the new token keys do not load; the keys in force stay");
            }
        }
    }

    /// Ticks at each reload that took effect.
    pub(crate) fn reloads(&self) -> tokio::sync::watch::Receiver<u64> {
        self.reloads.subscribe()
    }

    fn fetched_keys(&self) -> Option<String> {
        self.lock_fetched().clone()
    }

    fn lock_fetched(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.fetched_keys
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether the relay takes new clients now: not draining, and below
    /// `limits.max_sessions`.
    pub fn is_ready(&self) -> bool {
        self.gatekeeper.is_ready()
    }

    /// The fingerprint of the certificate in force, as it changes (a renewed certificate
    /// file, a self-signed certificate made anew): for a fingerprint file to rewrite.
    pub fn fingerprints(&self) -> tokio::sync::watch::Receiver<moqx_runtime::tls::Fingerprint> {
        self.certificates.subscribe()
    }

    /// The configuration in force.
    pub fn config(&self) -> Config {
        self.applied
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// `config`'s limits, but those a running relay cannot change (the memory budget, QUIC's
/// idle timeout, the endpoint's admission) as `applied` has them.
fn reloadable_limits(applied: &Config, config: &Config) -> crate::config::LimitsSection {
    let running = &applied.limits;
    crate::config::LimitsSection {
        max_memory_bytes: running.max_memory_bytes,
        idle_timeout_secs: running.idle_timeout_secs,
        max_half_open: running.max_half_open,
        retry_above_half_open: running.retry_above_half_open,
        max_sessions_per_address: running.max_sessions_per_address,
        ..config.limits.clone()
    }
}

fn is_reloadable(key: &str) -> bool {
    !NEEDS_RESTART.contains(&key)
        && RELOADABLE
            .iter()
            .any(|reloadable| match reloadable.strip_suffix('.') {
                Some(section) => key
                    .strip_prefix(section)
                    .is_some_and(|rest| rest.starts_with('.')),
                None => key == *reloadable,
            })
}

/// The `section.key` names whose values differ between `old` and `new`.
pub(crate) fn changed_keys(old: &Config, new: &Config) -> Vec<String> {
    let (old, new) = (flatten(old), flatten(new));
    let mut changed: Vec<String> = old
        .iter()
        .filter(|(key, value)| new.get(*key) != Some(value))
        .map(|(key, _)| key.clone())
        .collect();
    changed.extend(new.keys().filter(|key| !old.contains_key(*key)).cloned());
    changed.sort();
    changed.dedup();
    changed
}

/// Every value of `config` by its `section.key` name (a key left unset is absent).
fn flatten(config: &Config) -> BTreeMap<String, toml::Value> {
    let mut keys = BTreeMap::new();
    let Ok(toml::Value::Table(sections)) = toml::Value::try_from(config) else {
        return keys;
    };
    for (section, value) in sections {
        match value {
            toml::Value::Table(table) => {
                for (key, value) in table {
                    keys.insert(format!("{section}.{key}"), value);
                }
            }
            value => {
                keys.insert(section, value);
            }
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_named_and_sorted_into_applied_and_restart() {
        let old = Config::default();
        let mut new = Config::default();
        new.limits.max_sessions = 5;
        new.limits.idle_timeout_secs = 99;
        new.auth.public_subscribe = vec!["live".into()];
        new.server.bind = "127.0.0.1:1".parse().unwrap();
        new.log.filter = Some("debug".into());
        let changed = changed_keys(&old, &new);
        assert_eq!(
            changed,
            [
                "auth.public_subscribe",
                "limits.idle_timeout_secs",
                "limits.max_sessions",
                "log.filter",
                "server.bind"
            ]
        );
        let (applied, restart): (Vec<_>, Vec<_>) =
            changed.into_iter().partition(|key| is_reloadable(key));
        assert_eq!(
            applied,
            ["auth.public_subscribe", "limits.max_sessions", "log.filter"]
        );
        assert_eq!(restart, ["limits.idle_timeout_secs", "server.bind"]);
        assert!(!is_reloadable("authx.key"));
    }

    #[test]
    fn a_reload_keeps_what_needs_a_restart() {
        let mut running = Config::default();
        running.limits.max_sessions = 10;
        let mut file = Config::default();
        file.limits.max_sessions = 20;
        file.limits.idle_timeout_secs = 5;
        let limits = reloadable_limits(&running, &file);
        assert_eq!(limits.max_sessions, 20);
        assert_eq!(limits.idle_timeout_secs, running.limits.idle_timeout_secs);
    }
}
