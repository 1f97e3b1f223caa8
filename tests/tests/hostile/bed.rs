//! The test bed every hostile-peer test starts from: a relay on the suite's driver with a good
//! publisher and subscriber delivering through it, and the helpers that wait on it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moqx_net::model::{BroadcastProducer, Origin, Track, TrackProducer};
use moqx_net::session::{Session, SessionConfig};
use moqx_relay::{Config, Relay};
use moqx_tokio::{ClientConfig, connect};

/// A bound on every wait, so that a broken relay fails the test instead of hanging it.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// The relay and its good publisher and subscriber.
pub(crate) struct Bed {
    pub(crate) relay: SocketAddr,
    pub(crate) fingerprint: moqx_runtime::tls::Fingerprint,
    pub(crate) http: SocketAddr,
    pub(crate) track: TrackProducer,
    pub(crate) received: Arc<Mutex<Vec<String>>>,
    _sessions: (Session, Session),
    _broadcast: BroadcastProducer,
}

impl Bed {
    pub(crate) async fn start(edit: impl FnOnce(&mut Config)) -> Self {
        let mut config = Config::default();
        config.server.bind = "127.0.0.1:0".parse().unwrap();
        config.http.bind = Some("127.0.0.1:0".parse().unwrap());
        // The driver this copy of the suite runs on; two workers where there are workers,
        // so that connections land on both.
        config.server.driver = crate::DRIVER;
        config.server.workers = 2;
        edit(&mut config);
        let relay = Relay::bind(&config).await.unwrap();
        let (address, http, fingerprint) = (
            relay.local_addr(),
            relay.http_addr().unwrap(),
            relay.fingerprint(),
        );
        tokio::spawn(relay.run(std::future::pending()));
        let client = |session| {
            ClientConfig::default()
                .with_session(session)
                .with_fingerprint(fingerprint)
        };
        let url = format!("moqt://localhost:{}/", address.port());

        let published = Origin::new();
        let broadcast = BroadcastProducer::new();
        let track = broadcast.create_track(Track::new("chat"));
        published.publish("good", &broadcast).unwrap();
        let publisher = connect(
            &url,
            client(SessionConfig::default().with_publisher(&published)),
        )
        .await
        .unwrap();
        let seen = Origin::new();
        let subscriber = connect(
            &url,
            client(SessionConfig::default().with_subscriber(&seen)),
        )
        .await
        .unwrap();
        let received = read_chat(&seen, "good").await;
        let mut bed = Self {
            relay: address,
            fingerprint,
            http,
            track,
            received,
            _sessions: (publisher, subscriber),
            _broadcast: broadcast,
        };
        tokio::time::timeout(PATIENCE, async {
            while bed.track.consumer_count() == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the good subscription reaches the publisher");
        bed.delivers("ready").await;
        bed
    }

    /// Publishes `text` as a one-frame group and waits until the good subscriber has it.
    pub(crate) async fn delivers(&mut self, text: &str) {
        let mut group = self.track.append_group();
        group.write(0, text.to_owned());
        group.finish();
        let received = self.received.clone();
        let text = text.to_owned();
        tokio::time::timeout(PATIENCE, async move {
            while !received.lock().unwrap().contains(&text) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the good subscriber keeps receiving");
    }

    /// The relay's `/metrics` text.
    pub(crate) fn metrics_text(&self) -> String {
        let mut stream = TcpStream::connect(self.http).unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text
    }

    /// A good client of the relay, configured with `session`.
    pub(crate) async fn client(&self, session: SessionConfig) -> Session {
        let url = format!("moqt://localhost:{}/", self.relay.port());
        connect(
            &url,
            ClientConfig::default()
                .with_session(session)
                .with_fingerprint(self.fingerprint),
        )
        .await
        .expect("a good client connects")
    }

    /// A sample of the relay's `/metrics` (0 when absent).
    pub(crate) fn metric(&self, name: &str) -> u64 {
        self.metrics_text()
            .lines()
            .find_map(|line| line.strip_prefix(&format!("moq_relay_{name} ")))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0)
    }

    /// The relay's metric `name` once `reached` holds of it, or as it is after the
    /// patience: a metric the relay updates on another task may lag what a test saw.
    pub(crate) async fn metric_once(&self, name: &str, reached: impl Fn(u64) -> bool) -> u64 {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let value = self.metric(name);
            if reached(value) || tokio::time::Instant::now() >= deadline {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Runs the hostile part of a test on a blocking thread.
pub(crate) async fn hostile<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work).await.unwrap()
}

/// Waits until `path` is announced in `seen`, then reads its `chat` track in a task:
/// every frame, as text, in what it returns.
pub(crate) async fn read_chat(seen: &Origin, path: &str) -> Arc<Mutex<Vec<String>>> {
    let broadcast = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Some(broadcast) = seen.consume_broadcast(path) {
                return broadcast;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{path} is announced"));
    let received = Arc::new(Mutex::new(Vec::new()));
    let sink = received.clone();
    tokio::spawn(async move {
        let Ok(mut track) = broadcast.subscribe_track("chat").await else {
            return;
        };
        while let Ok(Some(mut group)) = track.next_group().await {
            while let Ok(Some(frame)) = group.read_frame().await {
                let text = String::from_utf8_lossy(&frame.payload).into_owned();
                sink.lock().unwrap().push(text);
            }
        }
    });
    received
}

pub(crate) async fn until_received(received: &Arc<Mutex<Vec<String>>>, text: &str) {
    let received = received.clone();
    let text = text.to_owned();
    tokio::time::timeout(PATIENCE, async move {
        while !received.lock().unwrap().contains(&text) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the subscriber receives it");
}
