//! The server's private key never touches the disk.
//!
//! Regression: quiche was given the certificate and key as PEM files written under the
//! system temp folder (a predictable path, default permissions) for the moment of loading.
//! Here the temp folder is a regular file, so nothing can be written under it: binding
//! used to fail with "creating a temporary directory"; now the key goes to BoringSSL from
//! memory, and a client pinning the certificate's fingerprint completes the handshake
//! (so the certificate loaded from memory is the one presented).
//!
//! Alone in its file: it changes the process's `TMPDIR`.

use std::time::Duration;

use moqx_net::session::SessionConfig;
use moqx_runtime::tls::Certificate;
use moqx_tokio::{ClientConfig, Server, ServerConfig, connect};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_binds_and_serves_with_no_writable_temp_folder() {
    let not_a_folder = std::env::temp_dir().join(format!("moq-no-tmp-{}", std::process::id()));
    std::fs::write(&not_a_folder, b"a file, not a folder").unwrap();
    // SAFETY: set before any other thread of this test process reads the environment
    // (the runtime's workers do not), and this file holds this one test.
    unsafe { std::env::set_var("TMPDIR", &not_a_folder) };
    assert_eq!(std::env::temp_dir(), not_a_folder);

    let certificate = Certificate::self_signed(&["localhost".into()]).unwrap();
    let fingerprint = certificate.fingerprint();
    let mut server = Server::bind(ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        certificate,
        SessionConfig::default(),
    ))
    .await
    .expect("binding needs no temp folder");
    let port = server.local_addr().port();
    tokio::spawn(async move {
        while let Some(request) = server.accept().await {
            drop(request.accept());
        }
    });

    let client = connect(
        &format!("moqt://localhost:{port}/"),
        ClientConfig::default().with_fingerprint(fingerprint),
    )
    .await
    .expect("the pinned certificate is the one presented");
    tokio::time::timeout(Duration::from_secs(10), client.established())
        .await
        .expect("within 10 s")
        .expect("the session is established");
    let _ = std::fs::remove_file(&not_a_folder);
}
