//! The smallest program that embeds MoQ, with one dependency (`moqx-tokio`): a relay on a
//! loopback port, a publisher of a track, and a subscriber that reads it back through
//! the relay.
//!
//! ```text
//! cargo run -p moq-examples --example embed
//! ```

use moqx_tokio::model::{BroadcastProducer, Origin, Track};
use moqx_tokio::{Certificate, Client, Server, ServerConfig, SessionConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A relay: every session publishes into and subscribes from one shared origin. (A
    // real relay checks each client's path and token: `Server::accept`.)
    let certificate = Certificate::self_signed(&["localhost".into()])?;
    let client = Client::new().with_fingerprint(certificate.fingerprint());
    let relay = SessionConfig::relay(&Origin::new());
    let config = ServerConfig::new("127.0.0.1:0".parse()?, certificate, relay);
    let server = Server::bind(config).await?;
    let url = format!("moqt://localhost:{}/", server.local_addr().port());
    server.accept_all();

    // A publisher of the broadcast `news`, with its track `headlines`.
    let (published, news) = (Origin::new(), BroadcastProducer::new());
    let mut headlines = news.create_track(Track::new("headlines"));
    published.publish("news", &news)?;
    let publisher = client.clone().with_publisher(&published);
    let _publisher = publisher.connect(&url).await?;

    // A subscriber: the relay announces `news` into `seen`, and the track is read there.
    let seen = Origin::new();
    let _subscriber = client.with_subscriber(&seen).connect(&url).await?;
    let mut frames = seen.follow_track("news", "headlines").await?.frames();
    headlines.used().await; // The subscription reached the publisher: write.
    headlines.write_group(0, "hello, through a relay");
    let (_group, frame) = frames.read_frame().await?.ok_or("the track ended")?;
    assert_eq!(frame.payload, "hello, through a relay");
    Ok(())
}
