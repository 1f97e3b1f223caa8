//! A relay and its clients in the test runtime, and hand-driven raw clients: what the
//! virtual-time scenario files share.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use moqx_net::Error;
use moqx_net::model::{BroadcastProducer, Origin, Track, TrackProducer};
use moqx_net::runtime::test::{LinkConfig, TestRuntime};
use moqx_net::session::{self, Session, SessionConfig};

/// A relay: server sessions whose halves share one origin.
pub(crate) struct Relay {
    pub(crate) origin: Origin,
    pub(crate) sessions: Vec<Session>,
    pub(crate) id: u64,
    /// What every session of the relay starts from (its limits); the origins and the hop
    /// id are the relay's.
    pub(crate) base: SessionConfig,
    /// The links its clients connect over.
    pub(crate) link: LinkConfig,
}

impl Relay {
    pub(crate) fn new() -> Self {
        Self::with_id(0)
    }

    /// A relay with an origin (hop) id, for routes through several relays.
    pub(crate) fn with_id(id: u64) -> Self {
        Self {
            origin: Origin::new(),
            sessions: Vec::new(),
            id,
            base: SessionConfig::default(),
            link: LinkConfig::default(),
        }
    }

    /// A relay whose sessions start from `base` (limits, hooks).
    pub(crate) fn with_config(base: SessionConfig) -> Self {
        Self {
            base,
            ..Self::new()
        }
    }

    /// How this relay's sessions are configured: both halves on the shared origin.
    pub(crate) fn config(&self) -> SessionConfig {
        SessionConfig {
            publish: Some(self.origin.clone()),
            subscribe: Some(self.origin.clone()),
            origin_id: self.id,
            ..self.base.clone()
        }
    }

    /// Connects `other` to this relay as a client: each forwards the other's broadcasts.
    pub(crate) fn link(&mut self, runtime: &TestRuntime, other: &mut Relay) {
        let link = self.link.clone();
        self.link_over(runtime, other, link);
    }

    /// [`link`](Self::link) over a link configured as `link` (one that drops, say).
    pub(crate) fn link_over(&mut self, runtime: &TestRuntime, other: &mut Relay, link: LinkConfig) {
        let (client_end, relay_end) = runtime.connect(link);
        self.sessions
            .push(session::accept(runtime.clone(), relay_end, self.config()));
        other.sessions.push(session::connect(
            runtime.clone(),
            client_end,
            other.config(),
        ));
    }

    /// Connects a client to this relay; the client's config says what it publishes and
    /// where it puts what it receives.
    pub(crate) fn connect(&mut self, runtime: &TestRuntime, client: SessionConfig) -> Session {
        let (client_end, relay_end) = runtime.connect(self.link.clone());
        self.sessions
            .push(session::accept(runtime.clone(), relay_end, self.config()));
        session::connect(runtime.clone(), client_end, client)
    }
}

/// A publisher client with one broadcast at `path` and one track `name`.
pub(crate) fn publisher(
    runtime: &TestRuntime,
    relay: &mut Relay,
    path: &str,
    name: &str,
) -> (Session, BroadcastProducer, TrackProducer) {
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new();
    let track = broadcast.create_track(Track::new(name));
    origin.publish(path, &broadcast).unwrap();
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
pub(crate) fn subscriber(runtime: &TestRuntime, relay: &mut Relay) -> (Session, Origin) {
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
pub(crate) struct Received {
    pub(crate) frames: Rc<RefCell<Vec<Bytes>>>,
    pub(crate) end: Rc<RefCell<Option<Result<(), Error>>>>,
}

/// Spawns a task that reads every frame of `path`/`name` from `origin`.
pub(crate) fn read_track(
    runtime: &TestRuntime,
    origin: &Origin,
    path: &str,
    name: &str,
) -> Received {
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

/// A second of virtual time.
pub(crate) const SECOND: Duration = Duration::from_secs(1);

/// Writes a one-frame group.
pub(crate) fn send(track: &mut TrackProducer, timestamp: u64, text: &'static str) {
    let mut group = track.append_group();
    group.write(timestamp, text);
    group.finish();
}

/// A relay, a publisher of `live`/`video`, and a subscriber already reading it.
pub(crate) fn live(
    runtime: &TestRuntime,
    relay: &mut Relay,
) -> (Session, TrackProducer, Session, Received) {
    let (publisher_session, broadcast, track) = publisher(runtime, relay, "live", "video");
    std::mem::forget(broadcast); // published for the whole test
    let (subscriber_session, origin) = subscriber(runtime, relay);
    assert!(runtime.run_until(SECOND, || origin.consume_broadcast("live").is_some()));
    let received = read_track(runtime, &origin, "live", "video");
    assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));
    (publisher_session, track, subscriber_session, received)
}

/// A hand-driven client of `relay`: raw streams, no session machine.
pub(crate) fn raw_client(
    runtime: &TestRuntime,
    relay: &mut Relay,
) -> moqx_net::runtime::test::TestTransport {
    let (client_end, relay_end) = runtime.connect(relay.link.clone());
    relay
        .sessions
        .push(session::accept(runtime.clone(), relay_end, relay.config()));
    client_end
}

/// Opens a uni stream and writes `bytes` to it, then FIN.
pub(crate) fn write_uni(transport: &mut moqx_net::runtime::test::TestTransport, bytes: &[u8]) {
    use moqx_net::transport::{SendStream, Session as _};
    let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
    let std::task::Poll::Ready(Ok(mut stream)) = transport.poll_open_uni(&waiter) else {
        panic!("the test transport opens at once");
    };
    let _ = stream.poll_write(&waiter, &mut Bytes::copy_from_slice(bytes));
    let _ = stream.finish();
}

/// Opens a bidi stream and writes `bytes` to it, then FIN.
pub(crate) fn write_bidi(transport: &mut moqx_net::runtime::test::TestTransport, bytes: &[u8]) {
    use moqx_net::transport::{SendStream, Session as _};
    let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
    let std::task::Poll::Ready(Ok((mut send, recv))) = transport.poll_open_bidi(&waiter) else {
        panic!("the test transport opens at once");
    };
    std::mem::forget(recv); // keep the receive half open
    let _ = send.poll_write(&waiter, &mut Bytes::copy_from_slice(bytes));
    let _ = send.finish();
}

/// The code the relay closed a raw client's connection with, once it did.
pub(crate) fn close_code(
    runtime: &TestRuntime,
    transport: &mut moqx_net::runtime::test::TestTransport,
) -> Option<u64> {
    use moqx_net::transport::{Session as _, TransportError};
    let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
    let mut code = None;
    runtime.run_until(SECOND, || match transport.poll_closed(&waiter) {
        std::task::Poll::Ready(TransportError::Closed { code: c, .. }) => {
            code = Some(c);
            true
        }
        _ => false,
    });
    code
}

/// The minimal valid client SETUP stream: type 1, length 1, no parameters.
pub(crate) const SETUP: &[u8] = &[0x01, 0x01, 0x00];

/// Opens a stream (uni, or bidi keeping its receive half) and writes `bytes`, leaving it
/// open: a peer that says a message is coming and keeps sending.
pub(crate) fn write_open(
    transport: &mut moqx_net::runtime::test::TestTransport,
    bidi: bool,
    bytes: &[u8],
) {
    use moqx_net::transport::{SendStream, Session as _};
    let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
    let mut send = if bidi {
        let std::task::Poll::Ready(Ok((send, recv))) = transport.poll_open_bidi(&waiter) else {
            panic!("the test transport opens at once");
        };
        std::mem::forget(recv);
        send
    } else {
        let std::task::Poll::Ready(Ok(send)) = transport.poll_open_uni(&waiter) else {
            panic!("the test transport opens at once");
        };
        send
    };
    let _ = send.poll_write(&waiter, &mut Bytes::copy_from_slice(bytes));
    std::mem::forget(send); // never FIN, never reset: the bytes keep "coming"
}
