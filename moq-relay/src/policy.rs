//! What a running relay may change without a restart: who may do what (the authorizer,
//! with its keys read anew), the limits each new session starts with, how many sessions
//! it takes, and how long a drain lasts. The gatekeeper reads one [`Policy`] per client;
//! a reload swaps in the next, and sessions already running keep the one they began with.

use std::sync::Arc;
use std::time::Duration;

use moqx_net::session::SessionConfig;

use crate::auth::{AuthError, Authorizer};
use crate::config::{Config, LimitsSection};

/// One version of the reloadable settings.
#[derive(Debug)]
pub(crate) struct Policy {
    /// Who may publish and subscribe to what.
    pub(crate) authorizer: Arc<Authorizer>,
    /// What each new session starts from (its origins are the authorizer's to choose).
    pub(crate) session: SessionConfig,
    /// `limits.max_sessions`.
    pub(crate) max_sessions: usize,
    /// `limits.max_pending_setup`.
    pub(crate) max_pending_setup: usize,
    /// `shutdown.drain_secs`.
    pub(crate) drain: Duration,
}

impl Policy {
    /// The policy `config` describes, over `base` (the settings a reload cannot change:
    /// the memory budget, the hop id, route trust): the key file is read now (or the set
    /// `fetched_keys` from `auth.key_url` parsed), so a bad one fails here and the policy
    /// in force stays.
    pub(crate) fn new(
        config: &Config,
        base: &SessionConfig,
        fetched_keys: Option<&str>,
    ) -> Result<Self, AuthError> {
        Ok(Self {
            authorizer: Arc::new(config.auth.authorizer(fetched_keys)?),
            session: session_limits(&config.limits, base.clone()),
            max_sessions: config.limits.max_sessions,
            max_pending_setup: config.limits.max_pending_setup,
            drain: config.drain(),
        })
    }
}

/// `session` with the per-session limits of `limits`.
pub(crate) fn session_limits(limits: &LimitsSection, mut session: SessionConfig) -> SessionConfig {
    let bounds = &mut session.limits;
    bounds.max_frame_size = limits.max_frame_size;
    bounds.max_subscriptions = limits.max_subscriptions_per_session;
    bounds.max_message_bytes = limits.max_message_bytes;
    bounds.max_setup_bytes = limits.max_setup_bytes;
    bounds.setup_timeout = Duration::from_secs(limits.setup_timeout_secs);
    bounds.max_announce_requests = limits.max_announce_requests_per_session;
    bounds.max_announces = limits.max_announces_per_session;
    bounds.max_announce_path_bytes = limits.max_announce_path_bytes_per_session;
    bounds.max_queued_groups = limits.max_queued_groups_per_session;
    bounds.max_group_bytes = limits.max_group_bytes;
    bounds.max_group_frames = limits.max_group_frames;
    bounds.max_receiving_group_bytes = limits.max_unfinished_group_bytes_per_session;
    session.cache.groups = limits.cache_groups_per_track;
    session.cache.bytes = match limits.cache_bytes_per_track {
        0 => None,
        bytes => Some(bytes),
    };
    session
}
