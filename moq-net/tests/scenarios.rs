//! Whole sessions in the test runtime: publisher → relay → subscribers, in virtual time.
//!
//! Each test runs with a seed (`MOQ_TEST_SEED` replays one) and prints it when it fails.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use moq_net::Error;
use moq_net::model::{BroadcastProducer, Origin, Track, TrackProducer};
use moq_net::runtime::test::{LinkConfig, TestRuntime, seeded};
use moq_net::session::{self, Session, SessionConfig};

/// A relay: server sessions whose halves share one origin.
struct Relay {
    origin: Origin,
    sessions: Vec<Session>,
}

impl Relay {
    fn new() -> Self {
        Self {
            origin: Origin::new(),
            sessions: Vec::new(),
        }
    }

    /// Connects a client to this relay; the client's config says what it publishes and
    /// where it puts what it receives.
    fn connect(&mut self, runtime: &TestRuntime, client: SessionConfig) -> Session {
        let (client_end, relay_end) = runtime.connect(LinkConfig::default());
        let relay_config = SessionConfig {
            publish: Some(self.origin.clone()),
            subscribe: Some(self.origin.clone()),
            ..SessionConfig::default()
        };
        self.sessions
            .push(session::accept(runtime.clone(), relay_end, relay_config));
        session::connect(runtime.clone(), client_end, client)
    }
}

/// A publisher client with one broadcast at `path` and one track `name`.
fn publisher(
    runtime: &TestRuntime,
    relay: &mut Relay,
    path: &str,
    name: &str,
) -> (Session, BroadcastProducer, TrackProducer) {
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new();
    let track = broadcast.create_track(Track::new(name));
    origin.publish(path, &broadcast);
    let session = relay.connect(
        runtime,
        SessionConfig {
            publish: Some(origin),
            ..SessionConfig::default()
        },
    );
    (session, broadcast, track)
}

/// A subscriber client; returns its session and the origin it fills.
fn subscriber(runtime: &TestRuntime, relay: &mut Relay) -> (Session, Origin) {
    let origin = Origin::new();
    let session = relay.connect(
        runtime,
        SessionConfig {
            subscribe: Some(origin.clone()),
            ..SessionConfig::default()
        },
    );
    (session, origin)
}

/// What a reading task saw: every frame, and how the track ended.
#[derive(Clone, Default)]
struct Received {
    frames: Rc<RefCell<Vec<Bytes>>>,
    end: Rc<RefCell<Option<Result<(), Error>>>>,
}

/// Spawns a task that reads every frame of `path`/`name` from `origin`.
fn read_track(runtime: &TestRuntime, origin: &Origin, path: &str, name: &str) -> Received {
    let received = Received::default();
    let (frames, end) = (received.frames.clone(), received.end.clone());
    let broadcast = origin.consume_broadcast(path).expect("announced");
    let name = name.to_owned();
    let (frames_out, end_out) = (frames, end);
    runtime.spawn_task(async move {
        let mut track = match broadcast.subscribe_track(&name).await {
            Ok(track) => track,
            Err(error) => {
                *end_out.borrow_mut() = Some(Err(error));
                return;
            }
        };
        let outcome = loop {
            match track.next_group().await {
                Ok(Some(mut group)) => {
                    while let Ok(Some(frame)) = group.read_frame().await {
                        frames_out.borrow_mut().push(frame.payload);
                    }
                }
                Ok(None) => break Ok(()),
                Err(error) => break Err(error),
            }
        };
        *end_out.borrow_mut() = Some(outcome);
    });
    received
}

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn a_frame_flows_from_publisher_through_relay_to_subscriber() {
    seeded(1, |runtime| {
        let mut relay = Relay::new();
        let (_publisher, _broadcast, mut track) =
            publisher(runtime, &mut relay, "room/alice", "chat");
        let (_subscriber, origin) = subscriber(runtime, &mut relay);
        assert!(
            runtime.run_until(SECOND, || origin.consume_broadcast("room/alice").is_some()),
            "the subscriber discovers the broadcast through the relay"
        );
        let received = read_track(runtime, &origin, "room/alice", "chat");
        assert!(
            runtime.run_until(SECOND, || track.consumer_count() > 0),
            "the subscription reaches the publisher"
        );
        let mut group = track.append_group();
        group.write(1000, "hello");
        group.finish();
        assert!(
            runtime.run_until(SECOND, || received.frames.borrow().len() == 1),
            "the frame arrives"
        );
        assert_eq!(received.frames.borrow()[0], "hello");
    });
}
