//! quiche configurations for moq-lite-05 clients and servers.

use moq_runtime::tls::Certificate;

use crate::Error;

/// Limits a connection is configured with.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub(crate) idle_timeout_ms: u64,
    pub(crate) max_streams: u64,
    pub(crate) stream_window: u64,
    pub(crate) connection_window: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            idle_timeout_ms: 30_000,
            max_streams: 1_000,
            stream_window: 1 << 20,
            connection_window: 16 << 20,
        }
    }
}

/// ALPN `moq-lite-05`: moq-lite on raw QUIC.
pub(crate) const RAW_QUIC: &[u8] = b"moq-lite-05";
/// ALPN `h3`: HTTP/3, carrying WebTransport.
pub(crate) const WEBTRANSPORT: &[u8] = b"h3";

/// A configuration offering `alpn`: a server's presents `certificate`; a client's verifies
/// the server unless `verify` is false.
pub(crate) fn quiche_config(
    certificate: Option<&Certificate>,
    verify: bool,
    limits: &Limits,
    alpn: &[&[u8]],
) -> Result<quiche::Config, Error> {
    let quic = |e: quiche::Error| Error::Quic(e.to_string());
    let mut config = quiche::Config::new(quiche::PROTOCOL_VERSION).map_err(quic)?;
    config.set_application_protos(alpn).map_err(quic)?;
    if let Some(certificate) = certificate {
        // quiche loads PEM from files: write them for the load, then remove them.
        let dir = std::env::temp_dir().join(format!(
            "moq-tokio-{}-{}",
            std::process::id(),
            certificate.fingerprint()
        ));
        std::fs::create_dir_all(&dir).map_err(Error::io("creating a temporary directory"))?;
        let (chain, key) = (dir.join("chain.pem"), dir.join("key.pem"));
        std::fs::write(&chain, certificate.chain_pem())
            .map_err(Error::io("writing the certificate"))?;
        std::fs::write(&key, certificate.key_pem()).map_err(Error::io("writing the key"))?;
        let loaded = config
            .load_cert_chain_from_pem_file(&chain.to_string_lossy())
            .and_then(|()| config.load_priv_key_from_pem_file(&key.to_string_lossy()));
        let _ = std::fs::remove_dir_all(&dir);
        loaded.map_err(|e| Error::Quic(format!("loading the certificate: {e}")))?;
    }
    config.verify_peer(verify && certificate.is_none());
    config.set_max_idle_timeout(limits.idle_timeout_ms);
    config.set_max_recv_udp_payload_size(moq_runtime::endpoint::MAX_DATAGRAM);
    config.set_max_send_udp_payload_size(moq_runtime::endpoint::MAX_DATAGRAM);
    config.set_initial_max_data(limits.connection_window);
    config.set_initial_max_stream_data_bidi_local(limits.stream_window);
    config.set_initial_max_stream_data_bidi_remote(limits.stream_window);
    config.set_initial_max_stream_data_uni(limits.stream_window);
    config.set_initial_max_streams_bidi(limits.max_streams);
    config.set_initial_max_streams_uni(limits.max_streams);
    config.enable_dgram(true, 1024, 1024);
    Ok(config)
}
