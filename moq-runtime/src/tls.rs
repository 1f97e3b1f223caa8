//! TLS certificates for an endpoint: loaded from PEM files, or made at start.
//!
//! A relay on a public name uses a real certificate from PEM files. A relay on loopback, in
//! a test, or behind a name it has no certificate for makes a self-signed one at start and
//! says its SHA-256 fingerprint, which a client pins (a browser's WebTransport
//! `serverCertificateHashes`, or the CLI's `--fingerprint`). Browsers accept such a pinned
//! certificate only if it is ECDSA P-256 and valid for at most 14 days, so that is what
//! [`Certificate::self_signed`] makes.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rcgen::{CertificateParams, DistinguishedName, KeyPair};
use sha2::{Digest, Sha256};

/// How long a self-signed certificate is valid: the most browsers accept for a pinned one.
pub const SELF_SIGNED_VALIDITY: Duration = Duration::from_secs(14 * 24 * 60 * 60);

/// A certificate chain and its private key, in PEM, with the leaf's fingerprint.
#[derive(Clone)]
pub struct Certificate {
    chain_pem: String,
    key_pem: String,
    fingerprint: Fingerprint,
}

/// The SHA-256 hash of a certificate's DER encoding.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

/// Why a certificate could not be loaded or made. Each names the file or setting at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A file does not hold what it should.
    #[error("{path}: {problem}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A self-signed certificate could not be made (a bad name, say).
    #[error("cannot make a self-signed certificate for {names:?}: {reason}")]
    SelfSigned {
        /// The names it was for.
        names: Vec<String>,
        /// Why.
        reason: String,
    },
}

impl Certificate {
    /// Loads a chain (leaf first) and its private key from PEM files.
    pub fn from_pem_files(chain: &Path, key: &Path) -> Result<Self, TlsError> {
        let chain_pem = read(chain)?;
        let key_pem = read(key)?;
        let leaf = pem::parse_many(&chain_pem)
            .map_err(|_| invalid(chain, "not PEM"))?
            .into_iter()
            .find(|block| block.tag() == "CERTIFICATE")
            .ok_or_else(|| invalid(chain, "holds no CERTIFICATE block"))?;
        let has_key = pem::parse_many(&key_pem)
            .map_err(|_| invalid(key, "not PEM"))?
            .iter()
            .any(|block| block.tag().ends_with("PRIVATE KEY"));
        if !has_key {
            return Err(invalid(key, "holds no PRIVATE KEY block"));
        }
        Ok(Self {
            fingerprint: Fingerprint::of(leaf.contents()),
            chain_pem,
            key_pem,
        })
    }

    /// A self-signed ECDSA P-256 certificate for `names` (DNS names or IP addresses),
    /// valid from now for [`SELF_SIGNED_VALIDITY`].
    pub fn self_signed(names: &[String]) -> Result<Self, TlsError> {
        Self::self_signed_for(names, SELF_SIGNED_VALIDITY)
    }

    /// [`self_signed`](Self::self_signed), valid from now for `validity` (browsers refuse
    /// to pin one valid for longer than [`SELF_SIGNED_VALIDITY`]).
    pub fn self_signed_for(names: &[String], validity: Duration) -> Result<Self, TlsError> {
        let failed = |reason: String| TlsError::SelfSigned {
            names: names.to_vec(),
            reason,
        };
        let mut params =
            CertificateParams::new(names.to_vec()).map_err(|e| failed(e.to_string()))?;
        params.distinguished_name = DistinguishedName::new();
        let now = SystemTime::now();
        params.not_before = now.into();
        params.not_after = (now + validity).into();
        let key = KeyPair::generate().map_err(|e| failed(e.to_string()))?;
        let certificate = params
            .self_signed(&key)
            .map_err(|e| failed(e.to_string()))?;
        Ok(Self {
            fingerprint: Fingerprint::of(certificate.der()),
            chain_pem: certificate.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// The chain, in PEM.
    pub fn chain_pem(&self) -> &str {
        &self.chain_pem
    }

    /// The private key, in PEM.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// The leaf certificate's fingerprint.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }
}

impl fmt::Debug for Certificate {
    /// Never prints the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Certificate")
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

impl Fingerprint {
    /// The fingerprint of a DER-encoded certificate.
    pub fn of(der: &[u8]) -> Self {
        Self(Sha256::digest(der).into())
    }

    /// Parses the usual text forms: 64 hex digits, optionally in colon-separated pairs.
    pub fn parse(text: &str) -> Option<Self> {
        let digits: Vec<u8> = text
            .bytes()
            .filter(|byte| *byte != b':')
            .map(|byte| (byte as char).to_digit(16).map(|d| d as u8))
            .collect::<Option<_>>()?;
        if digits.len() != 64 {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks(2)) {
            *byte = pair[0] << 4 | pair[1];
        }
        Some(Self(bytes))
    }
}

impl fmt::Display for Fingerprint {
    /// Lowercase hex pairs separated by colons, as browsers show it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, byte) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

fn read(path: &Path) -> Result<String, TlsError> {
    std::fs::read_to_string(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn invalid(path: &Path, problem: &'static str) -> TlsError {
    TlsError::Invalid {
        path: path.to_owned(),
        problem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of the test's own, removed when dropped.
    fn temp_dir(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("moq-tls-{name}-"))
            .tempdir()
            .unwrap()
    }

    #[test]
    fn a_self_signed_certificate_round_trips_through_pem_files_with_its_fingerprint() {
        let made = Certificate::self_signed(&["localhost".into(), "127.0.0.1".into()]).unwrap();
        let dir = temp_dir("roundtrip");
        let (chain, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&chain, made.chain_pem()).unwrap();
        std::fs::write(&key, made.key_pem()).unwrap();
        let loaded = Certificate::from_pem_files(&chain, &key).unwrap();
        assert_eq!(loaded.fingerprint(), made.fingerprint());
        assert!(made.key_pem().contains("PRIVATE KEY"));
        assert!(
            !format!("{made:?}").contains("PRIVATE"),
            "Debug never shows the key"
        );
        let other = Certificate::self_signed(&["localhost".into()]).unwrap();
        assert_ne!(
            other.fingerprint(),
            made.fingerprint(),
            "a fresh key each time"
        );
    }

    #[test]
    fn fingerprints_print_and_parse_in_both_forms() {
        let fingerprint = Fingerprint::of(b"not really a certificate");
        let text = fingerprint.to_string();
        assert_eq!(text.len(), 32 * 3 - 1);
        assert_eq!(Fingerprint::parse(&text), Some(fingerprint));
        assert_eq!(
            Fingerprint::parse(&text.replace(':', "")),
            Some(fingerprint)
        );
        assert_eq!(Fingerprint::parse("abc"), None);
        assert_eq!(Fingerprint::parse(&"zz".repeat(32)), None);
    }

    #[test]
    fn bad_files_are_named_with_what_is_wrong() {
        let dir = temp_dir("bad");
        let missing = dir.path().join("missing.pem");
        let error = Certificate::from_pem_files(&missing, &missing).unwrap_err();
        assert!(error.to_string().contains("missing.pem"), "{error}");

        let not_pem = dir.path().join("not.pem");
        std::fs::write(&not_pem, "hello").unwrap();
        let made = Certificate::self_signed(&["localhost".into()]).unwrap();
        let key = dir.path().join("key.pem");
        std::fs::write(&key, made.key_pem()).unwrap();
        let error = Certificate::from_pem_files(&not_pem, &key).unwrap_err();
        assert!(error.to_string().contains("not.pem"), "{error}");

        let chain = dir.path().join("chain.pem");
        std::fs::write(&chain, made.chain_pem()).unwrap();
        let error = Certificate::from_pem_files(&chain, &chain).unwrap_err();
        assert!(error.to_string().contains("PRIVATE KEY"), "{error}");
    }

    #[test]
    fn a_bad_name_is_refused_with_the_name() {
        // A DNS name in a certificate is ASCII (IA5String).
        let error = Certificate::self_signed(&["naïve.example".into()]).unwrap_err();
        assert!(error.to_string().contains("naïve.example"), "{error}");
    }
}
