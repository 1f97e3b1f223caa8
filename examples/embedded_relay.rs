//! A relay inside an application: no binary, just the library.
//!
//! The heart of a relay is small: accept every client, and give each session the same
//! [`Origin`] as both what it serves and where it publishes. Every broadcast one client
//! publishes is then discovered by all the others; a subscription travels upstream once,
//! however many subscribe, and is cancelled a moment after the last one leaves.
//!
//! This program runs such a relay on a loopback port, connects a publisher and a
//! subscriber to it, passes a few messages, and exits. For a relay with auth, limits,
//! metrics and a graceful stop, embed `moqx_relay::Relay` the same way.
//!
//! ```text
//! cargo run -p moq-examples --example embedded_relay
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::Duration;

use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::session::SessionConfig;
use moqx_runtime::tls::Certificate;
use moqx_tokio::{ClientConfig, Server, ServerConfig, connect};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The relay: one origin shared by every session, both halves.
    let shared = Origin::new();
    let certificate = Certificate::self_signed(&["localhost".into()])?;
    let fingerprint = certificate.fingerprint();
    let relay_config = SessionConfig::default()
        .with_publisher(&shared)
        .with_subscriber(&shared);
    let mut server = Server::bind(ServerConfig::new(
        "127.0.0.1:0".parse()?,
        certificate,
        relay_config,
    ))
    .await?;
    let port = server.local_addr().port();
    println!("relay on 127.0.0.1:{port}, certificate {fingerprint}");
    tokio::spawn(async move {
        while let Some(request) = server.accept().await {
            // A real relay checks the request's path (and token) here first.
            let _session = request.accept();
        }
    });

    // A client that trusts exactly this relay's certificate.
    let client = |session: SessionConfig| {
        ClientConfig::default()
            .with_session(session)
            .with_fingerprint(fingerprint)
    };
    let url = format!("moqt://localhost:{port}/");

    // A publisher of `news`, with a track `headlines`.
    let published = Origin::new();
    let news = BroadcastProducer::new();
    let mut headlines = news.create_track(Track::new("headlines"));
    published.publish("news", &news)?;
    let publisher = connect(
        &url,
        client(SessionConfig::default().with_publisher(&published)),
    )
    .await?;

    // A subscriber: what the relay announces lands in `seen`.
    let seen = Origin::new();
    let subscriber = connect(
        &url,
        client(SessionConfig::default().with_subscriber(&seen)),
    )
    .await?;
    let broadcast = loop {
        if let Some(broadcast) = seen.consume_broadcast("news") {
            break broadcast;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let mut track = broadcast.subscribe_track("headlines").await?;

    // Wait until the subscription reaches the publisher, then write.
    while headlines.consumer_count() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for text in ["relay embedded", "three messages", "then done"] {
        headlines.write_group(0, text);
    }
    headlines.finish();

    while let Some(mut group) = track.next_group().await? {
        while let Some(frame) = group.read_frame().await? {
            println!(
                "subscriber got: {}",
                String::from_utf8_lossy(&frame.payload)
            );
        }
    }
    println!("the track ended; closing");
    publisher.close(moqx_net::Error::Cancel);
    subscriber.close(moqx_net::Error::Cancel);
    let _ = tokio::join!(publisher.closed(), subscriber.closed());
    Ok(())
}
