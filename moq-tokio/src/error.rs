//! What can go wrong setting up a connection, said so that a user can act on it.

/// Why a client or server could not start or connect.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A socket operation failed (binding, resolving a name).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The URL is not one this driver connects to.
    #[error("bad URL {url:?}: {problem}")]
    Url {
        /// The URL.
        url: String,
        /// What is wrong with it.
        problem: String,
    },
    /// QUIC or TLS refused: a handshake failure, a certificate rejected, no common ALPN.
    #[error("QUIC: {0}")]
    Quic(String),
    /// A certificate or key could not be loaded or made.
    #[error(transparent)]
    Tls(#[from] moq_runtime::tls::TlsError),
    /// The connection closed before the handshake completed.
    #[error("the connection closed during the handshake: {0}")]
    Handshake(String),
    /// The WebTransport handshake failed: the server refused the CONNECT (its HTTP
    /// status), does not support WebTransport, or selected no version we offered.
    #[error("WebTransport: {0}")]
    WebTransport(#[from] moq_runtime::webtransport::WebTransportError),
    /// The server's certificate is not the pinned one.
    #[error("the server's certificate has fingerprint {}, not the pinned {expected}", .presented.map_or_else(|| "(none)".to_owned(), |f| f.to_string()))]
    CertificateRejected {
        /// The pinned fingerprint.
        expected: moq_runtime::tls::Fingerprint,
        /// The presented certificate's, if it presented one.
        presented: Option<moq_runtime::tls::Fingerprint>,
    },
    /// The endpoint task is gone (its runtime shut down).
    #[error("the endpoint stopped")]
    EndpointGone,
}

impl Error {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Error::Io { context, source }
    }
}
