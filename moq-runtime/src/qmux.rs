//! The QMux bindings' rules, shared by every socket-owning driver that carries them
//! (moq-lite over QMux over a WebSocket, TLS or TCP; spec: draft-lcurley-moq-lite
//! §Transports): the names negotiated (`moqx_qmux::negotiation`, re-exported here, which
//! the browser driver shares), the draft plain TCP speaks, and the QMux configuration
//! from the QUIC limits. The carriers themselves (sockets, TLS, the WebSocket) are the
//! driver's.

use std::time::Duration;

pub use moqx_qmux::negotiation::{Negotiated, choose, choose_in_band, chosen, client_offers};

use crate::quiche_config::QuicLimits;

/// The QMux draft a `tcp://` link speaks: plain TCP negotiates none, so both ends must
/// agree beforehand. Draft 01 is what deployed peers speak.
pub const TCP_DRAFT: moqx_qmux::Version = moqx_qmux::Version::Draft01;

/// How often a QMux connection asks a quiet peer for a word, and how long a silent one is
/// given before it is closed: a crashed client must not stay announced.
pub const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// The QMux configuration matching `limits`: the same idle timeout, streams and credit as
/// a QUIC connection of the same endpoint, with the keep-alive.
pub fn config(limits: &QuicLimits) -> moqx_qmux::Config {
    moqx_qmux::Config {
        idle_timeout: limits.idle_timeout,
        keep_alive: Some(KEEP_ALIVE.min(limits.idle_timeout / 3)),
        max_streams: limits.max_streams,
        stream_window: limits.stream_window,
        connection_window: limits.connection_window,
        ..moqx_qmux::Config::default()
    }
}
