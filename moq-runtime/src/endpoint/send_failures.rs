//! The warning for sends the kernel refused, rate-limited.

use std::net::SocketAddr;
use std::time::Instant;

/// Rate-limits the warning for refused sends: one line a second at most, naming how many
/// failed since the last one.
#[derive(Debug, Default)]
pub(super) struct SendFailureLog {
    last_warned: Option<Instant>,
    suppressed: u64,
}

impl SendFailureLog {
    const INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

    pub(super) fn record(
        &mut self,
        error: &std::io::Error,
        destination: SocketAddr,
        datagrams: usize,
        local: SocketAddr,
        now: Instant,
    ) {
        if self
            .last_warned
            .is_some_and(|at| now.saturating_duration_since(at) < Self::INTERVAL)
        {
            self.suppressed += 1;
            return;
        }
        tracing::warn!(
            %error,
            %local,
            %destination,
            datagrams,
            more_since_last_warning = self.suppressed,
            "a UDP send failed: its datagrams are lost until QUIC retransmits them"
        );
        self.last_warned = Some(now);
        self.suppressed = 0;
    }
}
