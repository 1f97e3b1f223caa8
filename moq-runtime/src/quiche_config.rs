//! quiche configurations for moq-lite servers and clients, built from our TLS
//! configuration in memory: the one place the QUIC parameters of every driver are chosen.

use std::time::Duration;

use moqx_net::coding::Version;

use crate::binding::Binding;
use crate::tls::Certificate;

/// The largest UDP payload a QUIC packet from us may have: the ceiling path MTU discovery
/// probes up to (a 1,500-byte Ethernet MTU less the IPv6 and UDP headers). Every
/// connection starts at QUIC's minimum of 1,200 bytes, which any path carries, and
/// raises its packets to the largest size a probe got through (quiche's DPLPMTUD, RFC
/// 8899); sockets set Don't Fragment, so a path that cannot carry a size drops the
/// probe instead of fragmenting it (review finding F9).
pub const MAX_DATAGRAM: usize = 1452;

/// The QUIC limits a connection is configured with (its transport parameters), and its
/// congestion controller.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuicLimits {
    /// Closes a connection silent this long.
    pub idle_timeout: Duration,
    /// Streams each direction a peer may open at once.
    pub max_streams: u64,
    /// Flow-control window per stream, in bytes (the most a peer may send unread).
    pub stream_window: u64,
    /// Flow-control window per connection, in bytes.
    pub connection_window: u64,
    /// The congestion controller.
    pub congestion_control: CongestionControl,
}

/// A congestion controller (quiche's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CongestionControl {
    /// CUBIC (RFC 9438), quiche's default. Sends what its window allows at once: quiche
    /// gives its packets no later send time, so nothing is paced.
    #[default]
    Cubic,
    /// NewReno (RFC 9002 §7). Not paced either.
    Reno,
    /// BBRv2 (quiche's port of Google's gcongestion). Paces: each packet gets a send
    /// time that spreads a window over a round trip, and the endpoint holds it until
    /// then; fewer losses at a shallow bottleneck queue.
    Bbr2,
}

impl CongestionControl {
    /// The names [`FromStr`](std::str::FromStr) takes.
    pub const NAMES: &[&str] = &["cubic", "reno", "bbr2"];

    fn algorithm(self) -> quiche::CongestionControlAlgorithm {
        match self {
            Self::Cubic => quiche::CongestionControlAlgorithm::CUBIC,
            Self::Reno => quiche::CongestionControlAlgorithm::Reno,
            Self::Bbr2 => quiche::CongestionControlAlgorithm::Bbr2Gcongestion,
        }
    }
}

impl std::str::FromStr for CongestionControl {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "cubic" => Ok(Self::Cubic),
            "reno" => Ok(Self::Reno),
            "bbr2" => Ok(Self::Bbr2),
            _ => Err(format!(
                "unknown congestion controller {name:?}; expected one of {}",
                Self::NAMES.join(", ")
            )),
        }
    }
}

impl std::fmt::Display for CongestionControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Cubic => "cubic",
            Self::Reno => "reno",
            Self::Bbr2 => "bbr2",
        })
    }
}

impl Default for QuicLimits {
    /// 30 s idle timeout, 1,000 streams each way, 1 MiB per stream and 16 MiB per
    /// connection of flow control, CUBIC.
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(30),
            max_streams: 1_000,
            stream_window: 1 << 20,
            connection_window: 16 << 20,
            congestion_control: CongestionControl::Cubic,
        }
    }
}

/// The most addresses a server's connection can see its client at in its life: quiche
/// 0.30 keeps one path per address (as many as the connection IDs it takes from the
/// peer, its `active_connection_id_limit`) and never frees one the client left
/// (cloudflare/quiche#2743, unreleased), so a client behind a NAT that rebinds more
/// often than this, over one connection, is cut off at the next rebinding: its packets
/// from a new address are dropped. Both sides take this many connection IDs from the
/// other: a client gives its server one for each path (`endpoint/cids.rs`), while a
/// client still gets only [`crate::endpoint::MAX_SPARE_CIDS`] spares from us (the
/// endpoint routes no more). Each path costs its own loss recovery, so it is not
/// unbounded either.
pub const MAX_CLIENT_PATHS: u64 = 16;

/// Why a quiche configuration could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// quiche refused a parameter.
    #[error("QUIC configuration: {0}")]
    Quic(#[from] quiche::Error),
    /// BoringSSL refused the certificate or its key.
    #[error("loading the certificate: {0}")]
    Certificate(#[from] boring::error::ErrorStack),
    /// A QUIC configuration asked for a binding that is not QUIC (a QMux one).
    #[error("the {0} binding does not run over QUIC")]
    NotQuic(Binding),
}

/// A server's configuration: presents `certificate`, and offers both bindings, raw QUIC
/// for each of `versions` and WebTransport (`h3`).
///
/// A raw QUIC client gets the first of `versions` (the server's order of preference) that
/// it offered, as deployed relays choose; one that offered none is refused in the TLS
/// handshake (alert 120, no_application_protocol).
pub fn server_config(
    certificate: &Certificate,
    limits: &QuicLimits,
    versions: &[Version],
) -> Result<quiche::Config, ConfigError> {
    let mut builder = tls_context(certificate)?;
    let alpns: Vec<Vec<u8>> = versions
        .iter()
        .map(|version| version.alpn().as_bytes().to_vec())
        .chain([crate::webtransport::ALPN.as_bytes().to_vec()])
        .collect();
    // quiche's own ALPN choice (`set_application_protos`) takes the client's order; a
    // callback on the TLS context takes ours. quiche leaves a callback set here in place
    // as long as its own list stays empty.
    builder.set_alpn_select_callback(move |_, offered| {
        select_alpn(&alpns, offered).ok_or(boring::ssl::AlpnError::ALERT_FATAL)
    });
    // The certificate and its key go to BoringSSL from memory: never a key file on disk.
    let mut config =
        quiche::Config::with_boring_ssl_ctx_builder(quiche::PROTOCOL_VERSION, builder)?;
    config.verify_peer(false);
    apply(&mut config, limits);
    Ok(config)
}

/// The first of `preference` among `offered` (a ClientHello's ALPN list in its wire form:
/// each protocol a length byte, then its bytes), as a slice of `offered`.
fn select_alpn<'a>(preference: &[Vec<u8>], offered: &'a [u8]) -> Option<&'a [u8]> {
    let mut protocols = Vec::new();
    let mut rest = offered;
    while let Some((&len, tail)) = rest.split_first() {
        let (protocol, tail) = tail.split_at_checked(usize::from(len))?;
        protocols.push(protocol);
        rest = tail;
    }
    preference.iter().find_map(|wanted| {
        protocols
            .iter()
            .copied()
            .find(|protocol| *protocol == wanted.as_slice())
    })
}

/// A client's configuration for `binding`, offering `versions` in order of preference (as
/// ALPNs on raw QUIC; WebTransport offers them in its CONNECT instead): it verifies the
/// server's certificate against the system's roots unless `verify` is false (a pinned
/// fingerprint is checked after the handshake instead, see [`crate::client`]).
pub fn client_config(
    binding: Binding,
    versions: &[Version],
    verify: bool,
    limits: &QuicLimits,
) -> Result<quiche::Config, ConfigError> {
    let mut config = quiche::Config::new(quiche::PROTOCOL_VERSION)?;
    let alpns: Vec<&[u8]> = match binding {
        Binding::Quic => versions
            .iter()
            .map(|version| version.alpn().as_bytes())
            .collect(),
        Binding::WebTransport => vec![crate::webtransport::ALPN.as_bytes()],
        other => return Err(ConfigError::NotQuic(other)),
    };
    config.set_application_protos(&alpns)?;
    config.verify_peer(verify);
    apply(&mut config, limits);
    Ok(config)
}

/// The parameters both sides share.
fn apply(config: &mut quiche::Config, limits: &QuicLimits) {
    config.set_max_idle_timeout(u64::try_from(limits.idle_timeout.as_millis()).unwrap_or(u64::MAX));
    config.set_max_recv_udp_payload_size(MAX_DATAGRAM);
    // Packets start at 1,200 bytes and grow to what the path carries, up to MAX_DATAGRAM.
    config.set_max_send_udp_payload_size(MAX_DATAGRAM);
    config.discover_pmtu(true);
    config.set_initial_max_data(limits.connection_window);
    config.set_initial_max_stream_data_bidi_local(limits.stream_window);
    config.set_initial_max_stream_data_bidi_remote(limits.stream_window);
    config.set_initial_max_stream_data_uni(limits.stream_window);
    config.set_initial_max_streams_bidi(limits.max_streams);
    config.set_initial_max_streams_uni(limits.max_streams);
    config.enable_dgram(true, 1024, 1024);
    config.set_cc_algorithm(limits.congestion_control.algorithm());
    // quiche gives the peer spare connection IDs only up to the lower of both sides'
    // limits, so both sides take as many as a server keeps paths: a client gives its
    // server one for each (`endpoint/cids.rs`). A server's endpoint still gives each
    // client only its `MAX_SPARE_CIDS`.
    config.set_active_connection_id_limit(MAX_CLIENT_PATHS);
}

/// A TLS context presenting `certificate`: its chain (leaf first) and private key, parsed
/// from the PEM held in memory.
fn tls_context(
    certificate: &Certificate,
) -> Result<boring::ssl::SslContextBuilder, boring::error::ErrorStack> {
    let mut builder = boring::ssl::SslContextBuilder::new(boring::ssl::SslMethod::tls())?;
    load_certificate(&mut builder, certificate)?;
    Ok(builder)
}

/// Puts `certificate` (its chain and key, from memory) into a TLS context: QUIC's, or a
/// TCP listener's ([`crate::tcp_tls`]).
pub(crate) fn load_certificate(
    builder: &mut boring::ssl::SslContextBuilder,
    certificate: &Certificate,
) -> Result<(), boring::error::ErrorStack> {
    use boring::pkey::PKey;
    use boring::x509::X509;

    let mut chain = X509::stack_from_pem(certificate.chain_pem().as_bytes())?.into_iter();
    if let Some(leaf) = chain.next() {
        builder.set_certificate(&leaf)?;
    }
    for intermediate in chain {
        builder.add_extra_chain_cert(intermediate)?;
    }
    let key = PKey::private_key_from_pem(certificate.key_pem().as_bytes())?;
    builder.set_private_key(&key)?;
    builder.check_private_key()
}

#[cfg(test)]
mod tests {
    use super::{CongestionControl, select_alpn};

    #[test]
    fn congestion_controllers_parse_by_name_and_an_unknown_one_lists_them() {
        for name in CongestionControl::NAMES {
            let control: CongestionControl = name.parse().unwrap();
            assert_eq!(control.to_string(), *name);
        }
        let error = "bbr".parse::<CongestionControl>().unwrap_err();
        assert!(error.contains("cubic, reno, bbr2"), "{error}");
    }

    fn wire(protocols: &[&str]) -> Vec<u8> {
        protocols
            .iter()
            .flat_map(|p| std::iter::once(p.len() as u8).chain(p.bytes()))
            .collect()
    }

    #[test]
    fn the_servers_preference_wins_among_what_the_client_offered() {
        let ours = [
            b"moq-lite-05".to_vec(),
            b"moq-lite-04".to_vec(),
            b"h3".to_vec(),
        ];
        let offered = wire(&["moq-lite-04", "moq-lite-05"]);
        assert_eq!(select_alpn(&ours, &offered), Some(&b"moq-lite-05"[..]));
        let offered = wire(&["moq-lite-03", "h3"]);
        assert_eq!(select_alpn(&ours, &offered), Some(&b"h3"[..]));
        assert_eq!(select_alpn(&ours, &wire(&["moq-lite-02"])), None);
    }

    #[test]
    fn a_malformed_alpn_list_selects_nothing() {
        let ours = [b"moq-lite-05".to_vec()];
        assert_eq!(select_alpn(&ours, &[20, b'm']), None);
        assert_eq!(select_alpn(&ours, &[]), None);
    }
}
