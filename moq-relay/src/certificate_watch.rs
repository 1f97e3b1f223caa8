//! Keeping the relay's certificate current without a restart.
//!
//! - From PEM files: their parent directories are watched (the `notify` crate: inotify on
//!   Linux), not the files, so that the ways certificates are renewed all count: a file
//!   rewritten in place, a new file renamed over the old (certbot, cert-manager), and a
//!   Kubernetes secret's symlink swap (`..data`). Each change is read after a short pause
//!   (a renewal writes the chain and the key one after the other), and the pair is put in
//!   force for new handshakes if it loads; a broken pair is logged and the old one stays.
//!   SIGHUP reads the files too, where the directory cannot be watched.
//! - Self-signed: regenerated a day (or a quarter of its validity, if shorter) before it
//!   expires, the new fingerprint logged and served at `/certificate.sha256`.
//!
//! Connections already up keep the certificate they were made with.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use moqx_runtime::certificates::Certificates;
use moqx_runtime::tls::{Certificate, Fingerprint};

use crate::config::TlsSection;
use crate::file_watch::FileWatch;

/// The relay's certificate, and who hears when it changes.
#[derive(Debug, Clone)]
pub(crate) struct CertificateFeed {
    pub(crate) certificates: Certificates,
    changed: Arc<tokio::sync::watch::Sender<Fingerprint>>,
}

impl CertificateFeed {
    pub(crate) fn new(certificates: Certificates) -> Self {
        let (changed, _) = tokio::sync::watch::channel(certificates.fingerprint());
        Self {
            certificates,
            changed: Arc::new(changed),
        }
    }

    /// Follows the fingerprint in force.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<Fingerprint> {
        self.changed.subscribe()
    }

    /// Puts `certificate` in force for new handshakes (nothing if it is the one in force).
    fn replace(&self, certificate: Certificate, why: &str) {
        let fingerprint = certificate.fingerprint();
        if self.certificates.replace(certificate) {
            tracing::info!(%fingerprint, "{why}: new handshakes get the new certificate");
            self.changed.send_replace(fingerprint);
        }
    }

    /// Reads `tls.cert` and `tls.key` again, if set: the new pair if it loads, else the
    /// old one stays (logged). Returns the error for a caller that reports it.
    pub(crate) fn reload_files(&self, tls: &TlsSection) -> Result<(), moqx_runtime::tls::TlsError> {
        let (Some(cert), Some(key)) = (&tls.cert, &tls.key) else {
            return Ok(());
        };
        match Certificate::from_pem_files(cert, key) {
            Ok(certificate) => {
                self.replace(certificate, "the certificate files changed");
                Ok(())
            }
            Err(error) => {
                tracing::warn!(%error, "the certificate files do not load; the certificate in force stays");
                Err(error)
            }
        }
    }
}

/// Starts what keeps the certificate current for `tls`: a watch of the PEM files'
/// directories, or the renewal of a self-signed certificate. The task ends when aborted.
pub(crate) fn spawn(tls: &TlsSection, feed: CertificateFeed) -> tokio::task::JoinHandle<()> {
    let tls = tls.clone();
    match (tls.cert.clone(), tls.key.clone()) {
        (Some(cert), Some(key)) => tokio::spawn(watch_files(tls, cert, key, feed)),
        _ => tokio::spawn(renew_self_signed(tls, feed)),
    }
}

/// Reloads the files after each change in their directories.
async fn watch_files(tls: TlsSection, cert: PathBuf, key: PathBuf, feed: CertificateFeed) {
    let Some(mut watch) = FileWatch::new(&[&cert, &key], "the certificate files") else {
        return;
    };
    while watch.changed().await.is_some() {
        let _ = feed.reload_files(&tls);
    }
}

/// Makes a new self-signed certificate before the one in force expires, for ever.
async fn renew_self_signed(tls: TlsSection, feed: CertificateFeed) {
    let validity = tls.self_signed_validity();
    loop {
        tokio::time::sleep(renew_after(validity)).await;
        match Certificate::self_signed_for(&tls.names, validity) {
            Ok(certificate) => feed.replace(
                certificate,
                "the self-signed certificate was about to expire; a new one was made",
            ),
            Err(error) => {
                tracing::error!(%error, "cannot make a new self-signed certificate");
                return;
            }
        }
    }
}

/// How long after it is made a self-signed certificate valid for `validity` is replaced:
/// a day before it expires, or a quarter of its validity before if that is shorter.
fn renew_after(validity: Duration) -> Duration {
    validity - (validity / 4).min(Duration::from_secs(24 * 60 * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_is_replaced_before_it_expires() {
        let day = Duration::from_secs(86_400);
        assert_eq!(renew_after(14 * day), 13 * day);
        assert_eq!(renew_after(Duration::from_secs(8)), Duration::from_secs(6));
    }
}
