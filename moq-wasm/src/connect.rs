//! Connecting a session to a relay from the browser.

use moq_net::coding::Version;
use moq_net::redact::Redacted;
use moq_net::session::{self, Session, SessionConfig};
use wasm_bindgen_futures::JsFuture;

use crate::bindings::{WebTransport, WebTransportHash, WebTransportOptions, dictionary};
use crate::runtime::WasmRuntime;
use crate::transport::{WebTransportSession, message};

/// Why a connection could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The fingerprint is not 64 hexadecimal digits (a SHA-256).
    #[error("the certificate fingerprint must be 64 hexadecimal digits (a SHA-256), got {0:?}")]
    Fingerprint(String),
    /// The browser refused to start (a malformed URL, an insecure page, no WebTransport).
    #[error("cannot open WebTransport to {url}: {reason}")]
    Refused {
        /// Where to.
        url: String,
        /// The browser's words.
        reason: String,
    },
    /// The handshake failed: nothing listening, a certificate that is not the pinned one
    /// (or not trusted), a server refusing the session.
    #[error(
        "could not connect to {url}: {reason} (is the relay running, and is the certificate \
         fingerprint the one it serves at /certificate.sha256?)"
    )]
    Handshake {
        /// Where to.
        url: String,
        /// The browser's words (browsers say little, to not reveal which check failed).
        reason: String,
    },
    /// The relay ended the session before answering its SETUP (it refused the client).
    #[error("the relay at {url} refused the session: {error} (code {code})", code = .error.to_code())]
    SessionRefused {
        /// Where to.
        url: String,
        /// The code the session ended with.
        error: moq_net::Error,
    },
    /// The session was up and the transport did not take it.
    #[error("the WebTransport session to {url} failed as it started: {reason}")]
    Transport {
        /// Where to.
        url: String,
        /// What failed.
        reason: String,
    },
}

/// How to reach a relay.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// SHA-256 digests of certificates to accept instead of the Web PKI (the browser's
    /// `serverCertificateHashes`: ECDSA certificates valid for at most 14 days, as a
    /// relay's self-signed one is). Empty: the certificate must be trusted as any site's.
    pub fingerprints: Vec<[u8; 32]>,
    /// The moq-lite versions offered as WebTransport protocols, in order of preference
    /// (the server takes the first it has).
    pub versions: Vec<Version>,
    /// The session's configuration; its version is replaced by the negotiated one.
    pub session: SessionConfig,
}

impl Default for ConnectOptions {
    /// No pinned certificate; offering moq-lite-05, -04 and -03.
    fn default() -> Self {
        Self {
            fingerprints: Vec::new(),
            versions: Version::DEFAULT_OFFER.to_vec(),
            session: SessionConfig::default(),
        }
    }
}

/// Connects to `url` (`https://host:port/root`) over WebTransport and starts a moq-lite
/// session on this thread's event loop. Resolves once the session is established (the
/// relay answered SETUP), as every driver's `connect` does; a relay that refuses the
/// client is an error naming its code.
pub async fn connect(url: &str, options: ConnectOptions) -> Result<Session, ConnectError> {
    let transport_options: WebTransportOptions = dictionary();
    if !options.fingerprints.is_empty() {
        let hashes = js_sys::Array::new();
        for fingerprint in &options.fingerprints {
            let hash: WebTransportHash = dictionary();
            hash.set_algorithm("sha-256");
            hash.set_value(&js_sys::Uint8Array::from(&fingerprint[..]));
            hashes.push(&hash);
        }
        transport_options.set_server_certificate_hashes(&hashes);
    }
    let protocols = js_sys::Array::new();
    for version in &options.versions {
        protocols.push(&version.alpn().into());
    }
    transport_options.set_protocols(&protocols);

    let transport =
        WebTransport::new(url, &transport_options).map_err(|error| ConnectError::Refused {
            url: Redacted(url).to_string(),
            reason: message(&error),
        })?;
    tracing::debug!(url = %Redacted(url), "WebTransport: connecting");
    if let Err(error) = JsFuture::from(transport.ready()).await {
        let reason = message(&error);
        tracing::debug!(url = %Redacted(url), %reason, "WebTransport: the handshake failed");
        return Err(ConnectError::Handshake {
            url: Redacted(url).to_string(),
            reason,
        });
    }
    let transport =
        WebTransportSession::new(transport).map_err(|error| ConnectError::Transport {
            url: Redacted(url).to_string(),
            reason: error.to_string(),
        })?;
    // The version the server chose. A browser that does not expose it (or a server that
    // names none) leaves the first offered: what a server choosing by the client's
    // preference picks.
    let chosen = moq_net::transport::Session::protocol(&transport).and_then(Version::from_alpn);
    let version = match (chosen, options.versions.first()) {
        (Some(version), _) if options.versions.contains(&version) => version,
        (None, Some(first)) => *first,
        (_, _) => {
            return Err(ConnectError::Transport {
                url: Redacted(url).to_string(),
                reason: format!(
                    "no moq-lite version in common: offered {:?}, the server chose {chosen:?}",
                    options
                        .versions
                        .iter()
                        .map(|v| v.alpn())
                        .collect::<Vec<_>>()
                ),
            });
        }
    };
    tracing::debug!(url = %Redacted(url), %version, "WebTransport: connected");
    let session = session::connect(
        WasmRuntime::new(),
        transport,
        SessionConfig {
            version,
            ..options.session
        },
    );
    // Like every driver's connect: done once the relay answered SETUP (let us in).
    session
        .established()
        .await
        .map_err(|error| ConnectError::SessionRefused {
            url: Redacted(url).to_string(),
            error,
        })?;
    Ok(session)
}

/// Parses a certificate fingerprint: 64 hexadecimal digits, with or without `:` between
/// bytes (as `/certificate.sha256` serves it, or as a browser shows it).
pub fn parse_fingerprint(text: &str) -> Result<[u8; 32], ConnectError> {
    let digits: Vec<u8> = text.trim().bytes().filter(|byte| *byte != b':').collect();
    let invalid = || ConnectError::Fingerprint(text.trim().to_owned());
    if digits.len() != 64 {
        return Err(invalid());
    }
    let mut fingerprint = [0u8; 32];
    for (byte, pair) in fingerprint.iter_mut().zip(digits.chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).map_err(|_| invalid())?;
        *byte = u8::from_str_radix(pair, 16).map_err(|_| invalid())?;
    }
    Ok(fingerprint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_parse_with_or_without_colons() {
        let plain = "00ff".repeat(16);
        let parsed = parse_fingerprint(&plain).unwrap();
        assert_eq!(parsed[0], 0x00);
        assert_eq!(parsed[1], 0xff);
        let colons: Vec<String> = parsed.iter().map(|byte| format!("{byte:02X}")).collect();
        assert_eq!(parse_fingerprint(&colons.join(":")).unwrap(), parsed);
        assert_eq!(parse_fingerprint(&format!(" {plain}\n")).unwrap(), parsed);
    }

    #[test]
    fn malformed_fingerprints_are_refused_by_name() {
        for bad in ["", "00", &"0".repeat(63), &"zz".repeat(32), &"é".repeat(32)] {
            let error = parse_fingerprint(bad).unwrap_err();
            assert!(matches!(error, ConnectError::Fingerprint(_)), "{bad:?}");
            assert!(error.to_string().contains("64 hexadecimal digits"));
        }
    }
}
