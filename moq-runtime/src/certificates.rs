//! The certificate a server presents, replaceable while it runs.
//!
//! A renewed certificate (Let's Encrypt, cert-manager, a self-signed one regenerated
//! before it expires) must reach new handshakes without a restart that would cut every
//! session. [`Certificates`] is the one place a server's endpoints read it from: each
//! endpoint notices a new generation before its next handshake and rebuilds its QUIC
//! configuration then; connections already up keep the certificate they were made with.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::tls::{Certificate, Fingerprint};

/// A shared, replaceable certificate: clones are handles on the same one.
#[derive(Debug, Clone)]
pub struct Certificates {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Bumped by each replacement, read by endpoints on every new handshake.
    generation: AtomicU64,
    current: RwLock<Certificate>,
}

impl Certificates {
    /// Starts with `certificate`.
    pub fn new(certificate: Certificate) -> Self {
        Self {
            inner: Arc::new(Inner {
                generation: AtomicU64::new(0),
                current: RwLock::new(certificate),
            }),
        }
    }

    /// The certificate new handshakes get.
    pub fn current(&self) -> Certificate {
        self.inner
            .current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The current certificate's fingerprint.
    pub fn fingerprint(&self) -> Fingerprint {
        self.current().fingerprint()
    }

    /// How many times it was replaced: an endpoint compares it with the one its QUIC
    /// configuration was built at.
    pub fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Acquire)
    }

    /// Puts `certificate` in force for new handshakes; returns whether it differs from the
    /// one in force (the same one again changes nothing).
    pub fn replace(&self, certificate: Certificate) -> bool {
        let mut current = self
            .inner
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if current.fingerprint() == certificate.fingerprint()
            && current.key_pem() == certificate.key_pem()
        {
            return false;
        }
        *current = certificate;
        self.inner.generation.fetch_add(1, Ordering::AcqRel);
        true
    }
}

/// Builds a QUIC configuration presenting a certificate.
pub(crate) type Rebuild =
    dyn Fn(&Certificate) -> Result<quiche::Config, crate::quiche_config::ConfigError> + Send;

/// An endpoint's view of a [`Certificates`]: the generation its configuration holds, and
/// how to build a configuration for another certificate.
pub(crate) struct Watched {
    pub(crate) certificates: Certificates,
    pub(crate) generation: u64,
    pub(crate) rebuild: Box<Rebuild>,
}

impl std::fmt::Debug for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched")
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl Watched {
    /// A configuration for the certificate now in force, if it changed since the last
    /// look. A certificate the TLS library refuses leaves the old configuration (logged).
    pub(crate) fn refreshed(&mut self) -> Option<quiche::Config> {
        let generation = self.certificates.generation();
        if generation == self.generation {
            return None;
        }
        self.generation = generation;
        let certificate = self.certificates.current();
        match (self.rebuild)(&certificate) {
            Ok(config) => {
                tracing::debug!(fingerprint = %certificate.fingerprint(), "new handshakes get the new certificate");
                Some(config)
            }
            Err(error) => {
                tracing::warn!(%error, "the new certificate was refused; new handshakes keep the old one");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_bumps_the_generation_once() {
        let first = Certificate::self_signed(&["localhost".into()]).unwrap();
        let second = Certificate::self_signed(&["localhost".into()]).unwrap();
        let certificates = Certificates::new(first.clone());
        let handle = certificates.clone();
        assert_eq!(certificates.generation(), 0);
        assert!(!handle.replace(first.clone()), "the same one again");
        assert_eq!(certificates.generation(), 0);
        assert!(handle.replace(second.clone()));
        assert_eq!(certificates.generation(), 1);
        assert_eq!(certificates.fingerprint(), second.fingerprint());
    }
}
