//! TLS over TCP for the QMux bindings, with the BoringSSL QUIC already uses (one TLS
//! stack, one certificate): the server's context presents the endpoint's certificate and
//! chooses by ALPN between QMux (`tls://`, a name such as `qmux-01.moq-lite-05`) and HTTP
//! (`wss://` and the web port's pages: `http/1.1`, or no ALPN at all); the client's offers
//! one or the other, and verifies the server against the system's roots or a pinned
//! fingerprint. The handshake itself runs in the driver (`tokio-boring`).

use boring::ssl::{AlpnError, SslAcceptor, SslConnector, SslMethod, SslRef, SslVerifyMode};
use moqx_net::coding::Version;

use crate::client::ClientConfig;
use crate::qmux::{Negotiated, choose};
use crate::quiche_config::ConfigError;
use crate::tls::{Certificate, Fingerprint};

/// The ALPN of HTTP/1.1, which a WebSocket over TLS (`wss://`) rides on.
pub const HTTP1: &str = "http/1.1";

/// A server's TLS context: `certificate`, and an ALPN choice of the QMux name for its
/// first version of `versions` the client offered, else `http/1.1` if offered, else none
/// (an HTTP client that named no protocol).
pub fn server_context(
    certificate: &Certificate,
    versions: &[Version],
) -> Result<SslAcceptor, ConfigError> {
    let mut builder = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls())?;
    crate::quiche_config::load_certificate(&mut builder, certificate)?;
    let versions = versions.to_vec();
    builder.set_alpn_select_callback(move |_, offered| {
        let names = alpn_names(offered);
        let owned: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let chosen = choose(&owned, &versions);
        let wanted = match &chosen {
            Some(negotiated) => negotiated.name.as_str(),
            None if names.contains(&HTTP1) => HTTP1,
            None => return Err(AlpnError::NOACK),
        };
        find_in_wire(offered, wanted).ok_or(AlpnError::NOACK)
    });
    Ok(builder.build())
}

/// What a server's finished handshake chose: QMux (and which), or HTTP (`None`).
pub fn negotiated(ssl: &SslRef, versions: &[Version]) -> Option<Negotiated> {
    let alpn = std::str::from_utf8(ssl.selected_alpn_protocol()?).ok()?;
    crate::qmux::chosen(alpn, versions)
}

/// A client's TLS context offering `alpns`: it verifies the server's certificate against
/// the system's roots, unless the configuration pins a fingerprint (checked after the
/// handshake with [`presented`]) or skips verification.
pub fn client_context(
    config: &ClientConfig,
    alpns: &[String],
) -> Result<SslConnector, ConfigError> {
    let mut builder = SslConnector::builder(SslMethod::tls())?;
    let mut wire = Vec::new();
    for alpn in alpns {
        // A name is at most 255 bytes on the wire; ours are a few dozen.
        if let Ok(len) = u8::try_from(alpn.len()) {
            wire.push(len);
            wire.extend_from_slice(alpn.as_bytes());
        }
    }
    builder.set_alpn_protos(&wire)?;
    if config.insecure_skip_verify || config.fingerprint.is_some() {
        builder.set_verify(SslVerifyMode::NONE);
    } else {
        builder.set_default_verify_paths()?;
        builder.set_verify(SslVerifyMode::PEER);
    }
    Ok(builder.build())
}

/// Whether the client's configuration wants the server's name checked against its
/// certificate (it does unless a fingerprint is pinned or verification is off).
pub fn verifies_name(config: &ClientConfig) -> bool {
    !config.insecure_skip_verify && config.fingerprint.is_none()
}

/// The fingerprint of the certificate the server presented.
pub fn presented(ssl: &SslRef) -> Option<Fingerprint> {
    let der = ssl.peer_certificate()?.to_der().ok()?;
    Some(Fingerprint::of(&der))
}

/// The protocol names of a ClientHello's ALPN list (each a length byte, then its bytes).
fn alpn_names(offered: &[u8]) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = offered;
    while let Some((&len, tail)) = rest.split_first() {
        let Some((name, tail)) = tail.split_at_checked(usize::from(len)) else {
            break;
        };
        if let Ok(name) = std::str::from_utf8(name) {
            names.push(name);
        }
        rest = tail;
    }
    names
}

/// `wanted` as a slice of the wire list `offered` (the callback must return one).
fn find_in_wire<'a>(offered: &'a [u8], wanted: &str) -> Option<&'a [u8]> {
    let mut rest = offered;
    while let Some((&len, tail)) = rest.split_first() {
        let (name, tail) = tail.split_at_checked(usize::from(len))?;
        if name == wanted.as_bytes() {
            return Some(name);
        }
        rest = tail;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(names: &[&str]) -> Vec<u8> {
        names
            .iter()
            .flat_map(|name| std::iter::once(name.len() as u8).chain(name.bytes()))
            .collect()
    }

    #[test]
    fn the_alpn_wire_list_reads_back() {
        let offered = wire(&["qmux-01.moq-lite-05", "http/1.1"]);
        assert_eq!(alpn_names(&offered), ["qmux-01.moq-lite-05", "http/1.1"]);
        assert_eq!(find_in_wire(&offered, "http/1.1"), Some(&b"http/1.1"[..]));
        assert_eq!(find_in_wire(&offered, "h2"), None);
        // A length past the end: the names before it, and no panic.
        assert_eq!(alpn_names(&[3, b'a', b'b']), Vec::<&str>::new());
    }

    #[test]
    fn both_contexts_build_with_a_self_signed_certificate() {
        let certificate = Certificate::self_signed(&["localhost".into()]).unwrap();
        assert!(server_context(&certificate, &Version::DEFAULT_OFFER).is_ok());
        assert!(client_context(&ClientConfig::default(), &["http/1.1".into()]).is_ok());
    }
}
