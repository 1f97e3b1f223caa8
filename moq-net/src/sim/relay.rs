//! The pieces a simulated topology is made of: a [`Relay`] (server sessions whose halves
//! share one origin), clients of it ([`publisher`], [`subscriber`]), and a task that
//! records what a subscriber reads ([`read_track`], [`follow_track`]).

use std::cell::RefCell;
use std::rc::Rc;

use bytes::Bytes;

use crate::Error;
use crate::model::{BroadcastProducer, Origin, Track, TrackProducer};
use crate::runtime::test::{LinkConfig, TestRuntime, TestTransport};
use crate::session::{self, Session, SessionConfig};

/// A relay in virtual time: every session it accepts publishes into and subscribes from
/// one shared [`origin`](Self::origin), so each client's broadcasts reach every other
/// client, and relays [linked](Self::link) to each other forward what they have.
#[derive(Debug)]
#[non_exhaustive]
pub struct Relay {
    /// What every session of the relay publishes into and serves from.
    pub origin: Origin,
    /// The relay's sessions, in the order they were accepted (links, then clients).
    pub sessions: Vec<Session>,
    /// Its origin (hop) id, which routes through several relays carry; 0 for none.
    pub id: u64,
    /// What every session of the relay starts from (its limits, an authorization hook);
    /// the origins and the hop id are the relay's own.
    pub base: SessionConfig,
    /// The link its clients and links connect over (latency, bandwidth, faults).
    pub link: LinkConfig,
}

impl Relay {
    /// A relay with no hop id, default sessions and default links.
    pub fn new() -> Self {
        Self::with_id(0)
    }

    /// A relay with an origin (hop) id, for routes through several relays: each relay of
    /// a topology needs its own.
    pub fn with_id(id: u64) -> Self {
        Self {
            origin: Origin::new(),
            sessions: Vec::new(),
            id,
            base: SessionConfig::default(),
            link: LinkConfig::default(),
        }
    }

    /// A relay whose sessions start from `base` (limits, an authorization hook).
    pub fn with_config(base: SessionConfig) -> Self {
        Self {
            base,
            ..Self::new()
        }
    }

    /// How this relay's sessions are configured: both halves on the shared origin.
    pub fn config(&self) -> SessionConfig {
        let mut config = self.base.clone();
        config.publish = Some(self.origin.clone());
        config.subscribe = Some(self.origin.clone());
        config.origin_id = self.id;
        config
    }

    /// Connects `other` to this relay as a client over this relay's link: each forwards
    /// the other's broadcasts. Returns a handle to the link, to
    /// [`cut`](TestTransport::cut) it.
    pub fn link(&mut self, runtime: &TestRuntime, other: &mut Relay) -> TestTransport {
        let link = self.link.clone();
        self.link_over(runtime, other, link)
    }

    /// [`link`](Self::link) over a link configured as `link` (one that drops, say).
    pub fn link_over(
        &mut self,
        runtime: &TestRuntime,
        other: &mut Relay,
        link: LinkConfig,
    ) -> TestTransport {
        let (client_end, relay_end) = runtime.connect(link);
        let handle = client_end.handle();
        self.sessions
            .push(session::accept(runtime.clone(), relay_end, self.config()));
        other.sessions.push(session::connect(
            runtime.clone(),
            client_end,
            other.config(),
        ));
        handle
    }

    /// Connects a client to this relay; the client's config says what it publishes and
    /// where it puts what it receives.
    pub fn connect(&mut self, runtime: &TestRuntime, client: SessionConfig) -> Session {
        self.connect_over(runtime, client).0
    }

    /// [`connect`](Self::connect), also returning a handle to the client's link, to
    /// [`cut`](TestTransport::cut) it.
    pub fn connect_over(
        &mut self,
        runtime: &TestRuntime,
        client: SessionConfig,
    ) -> (Session, TestTransport) {
        let (client_end, relay_end) = runtime.connect(self.link.clone());
        let handle = client_end.handle();
        self.sessions
            .push(session::accept(runtime.clone(), relay_end, self.config()));
        (
            session::connect(runtime.clone(), client_end, client),
            handle,
        )
    }
}

impl Default for Relay {
    fn default() -> Self {
        Self::new()
    }
}

/// A publisher client of `relay` with one broadcast at `path` and one track `name`:
/// its session, its broadcast (keep it: dropping it ends the broadcast) and its track.
pub fn publisher(
    runtime: &TestRuntime,
    relay: &mut Relay,
    path: &str,
    name: &str,
) -> (Session, BroadcastProducer, TrackProducer) {
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new();
    let track = broadcast.create_track(Track::new(name));
    origin
        .publish(path, &broadcast)
        .expect("a new origin takes any path");
    let session = relay.connect(runtime, SessionConfig::default().with_publisher(&origin));
    (session, broadcast, track)
}

/// A subscriber client of `relay`: its session, and the origin the relay's broadcasts
/// are announced into.
pub fn subscriber(runtime: &TestRuntime, relay: &mut Relay) -> (Session, Origin) {
    let origin = Origin::new();
    let session = relay.connect(runtime, SessionConfig::default().with_subscriber(&origin));
    (session, origin)
}

/// What a reading task saw: every frame, in the order read, and how the track ended
/// (`None` while it goes on).
#[derive(Debug, Clone, Default)]
pub struct Received {
    /// The frames' payloads.
    pub frames: Rc<RefCell<Vec<Bytes>>>,
    /// How the track ended: `Ok` at its end, the error it failed with.
    pub end: Rc<RefCell<Option<Result<(), Error>>>>,
}

impl Received {
    /// The payloads read so far, as text (lossy UTF-8).
    pub fn texts(&self) -> Vec<String> {
        self.frames
            .borrow()
            .iter()
            .map(|frame| String::from_utf8_lossy(frame).into_owned())
            .collect()
    }

    /// How many frames were read.
    pub fn len(&self) -> usize {
        self.frames.borrow().len()
    }

    /// Whether no frame was read yet.
    pub fn is_empty(&self) -> bool {
        self.frames.borrow().is_empty()
    }

    fn push(&self, payload: Bytes) {
        self.frames.borrow_mut().push(payload);
    }

    fn finish(&self, outcome: Result<(), Error>) {
        *self.end.borrow_mut() = Some(outcome);
    }
}

/// Spawns a task that reads every frame of the track `name` of the broadcast at `path`,
/// which `origin` must have now, group after group, until the track ends or fails.
///
/// # Panics
///
/// If `origin` has no broadcast at `path`.
pub fn read_track(runtime: &TestRuntime, origin: &Origin, path: &str, name: &str) -> Received {
    let received = Received::default();
    let broadcast = origin.consume_broadcast(path).expect("announced");
    let (name, out) = (name.to_owned(), received.clone());
    runtime.spawn_task(async move {
        let mut track = match broadcast.subscribe_track(&name).await {
            Ok(track) => track,
            Err(error) => return out.finish(Err(error)),
        };
        let outcome = loop {
            match track.next_group().await {
                Ok(Some(mut group)) => {
                    while let Ok(Some(frame)) = group.read_frame().await {
                        out.push(frame.payload);
                    }
                }
                Ok(None) => break Ok(()),
                Err(error) => break Err(error),
            }
        };
        out.finish(outcome);
    });
    received
}

/// Spawns a task that follows the track `name` of the broadcast at `path` in `origin`
/// ([`Origin::follow_track`]): it waits for the broadcast to be announced, reads every
/// frame as it arrives, and carries on from the first missing group when a route comes
/// back after one was lost (a partition healed, a relay restarted).
pub fn follow_track(runtime: &TestRuntime, origin: &Origin, path: &str, name: &str) -> Received {
    let received = Received::default();
    let (origin, path, name, out) = (
        origin.clone(),
        path.to_owned(),
        name.to_owned(),
        received.clone(),
    );
    runtime.spawn_task(async move {
        let mut frames = match origin.follow_track(path.as_str(), &name).await {
            Ok(track) => track.frames(),
            Err(error) => return out.finish(Err(error)),
        };
        let outcome = loop {
            match frames.read_frame().await {
                Ok(Some((_group, frame))) => out.push(frame.payload),
                Ok(None) => break Ok(()),
                Err(error) => break Err(error),
            }
        };
        out.finish(outcome);
    });
    received
}

/// Writes a group of one frame: the shape of a chat message.
pub fn send(track: &mut TrackProducer, timestamp: u64, payload: impl Into<Bytes>) {
    let mut group = track.append_group();
    group.write(timestamp, payload);
    group.finish();
}
