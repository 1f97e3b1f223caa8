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
    let mut config = match certificate {
        // The certificate and its key go to BoringSSL from memory: never a key file on disk.
        Some(certificate) => quiche::Config::with_boring_ssl_ctx_builder(
            quiche::PROTOCOL_VERSION,
            tls_context(certificate)
                .map_err(|e| Error::Quic(format!("loading the certificate: {e}")))?,
        )
        .map_err(quic)?,
        None => quiche::Config::new(quiche::PROTOCOL_VERSION).map_err(quic)?,
    };
    config.set_application_protos(alpn).map_err(quic)?;
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

/// A TLS context presenting `certificate`: its chain (leaf first) and private key, parsed
/// from the PEM held in memory.
fn tls_context(
    certificate: &Certificate,
) -> Result<boring::ssl::SslContextBuilder, boring::error::ErrorStack> {
    use boring::pkey::PKey;
    use boring::ssl::{SslContextBuilder, SslMethod};
    use boring::x509::X509;

    let mut builder = SslContextBuilder::new(SslMethod::tls())?;
    let mut chain = X509::stack_from_pem(certificate.chain_pem().as_bytes())?.into_iter();
    if let Some(leaf) = chain.next() {
        builder.set_certificate(&leaf)?;
    }
    for intermediate in chain {
        builder.add_extra_chain_cert(intermediate)?;
    }
    let key = PKey::private_key_from_pem(certificate.key_pem().as_bytes())?;
    builder.set_private_key(&key)?;
    builder.check_private_key()?;
    Ok(builder)
}
