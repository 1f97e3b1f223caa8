//! A chat-shaped subscription over a connected pair: the server publishes a track of
//! one-frame groups, the client subscribes and counts the frames it reads.

use std::cell::Cell;
use std::rc::Rc;

use moqx_net::model::{BroadcastProducer, Origin, Track, TrackProducer};
use moqx_net::session::{self, Session, SessionConfig};
use moqx_runtime::binding::BindingSession;
use moqx_runtime::quic::QuicConnection;

use super::{BusyRuntime, run_until};

/// The server's track, the client's count of frames read, and both sessions (which the
/// caller keeps alive).
pub(crate) struct ChatSubscription {
    pub(crate) track: TrackProducer,
    pub(crate) received: Rc<Cell<u64>>,
    pub(crate) sessions: (Session, Session),
    /// Published for the whole test.
    _broadcast: BroadcastProducer,
}

impl ChatSubscription {
    /// Publishes `groups` one-frame groups, `batch` at a time (the publisher runs ahead of
    /// the network by that much), pumping after each batch until all of it arrived: a
    /// group left behind would be a lost message.
    pub(crate) fn publish(
        &mut self,
        runtime: &BusyRuntime,
        client: &QuicConnection,
        server: &QuicConnection,
        groups: u64,
        batch: u64,
    ) {
        let start = self.received.get();
        let mut sent = 0;
        while sent < groups {
            for _ in 0..batch.min(groups - sent) {
                let mut group = self.track.append_group();
                group.write(sent, "hello");
                group.finish();
                sent += 1;
            }
            let goal = start + sent;
            let received = &self.received;
            assert!(
                run_until(runtime, client, server, || received.get() >= goal),
                "{} of {goal} groups arrived",
                received.get()
            );
        }
    }
}

/// Sessions over `server_transport` (publishing `room`/`chat`) and `client_transport`
/// (subscribed to it and reading every frame), once the subscription reached the server.
pub(crate) fn chat_subscription(
    runtime: &BusyRuntime,
    client: &QuicConnection,
    server: &QuicConnection,
    server_transport: BindingSession,
    client_transport: BindingSession,
) -> ChatSubscription {
    let published = Origin::new();
    let broadcast = BroadcastProducer::new();
    let track = broadcast.create_track(Track::new("chat"));
    published.publish("room", &broadcast).unwrap();
    let server_session = session::accept(
        runtime.clone(),
        server_transport,
        SessionConfig::default().with_publisher(&published),
    );
    let discovered = Origin::new();
    let client_session = session::connect(runtime.clone(), client_transport, {
        let mut session_config = SessionConfig::default();
        session_config.subscribe = Some(discovered.clone());
        session_config.path = Some("/".into());
        session_config
    });
    assert!(
        run_until(runtime, client, server, || discovered
            .consume_broadcast("room")
            .is_some()),
        "the client discovers the broadcast"
    );
    let received = Rc::new(Cell::new(0u64));
    let remote = discovered.consume_broadcast("room").unwrap();
    let count = received.clone();
    runtime.spawn_task(async move {
        let Ok(mut track) = remote.subscribe_track("chat").await else {
            return;
        };
        while let Ok(Some(mut group)) = track.next_group().await {
            while let Ok(Some(_frame)) = group.read_frame().await {
                count.set(count.get() + 1);
            }
        }
    });
    assert!(
        run_until(runtime, client, server, || track.consumer_count() > 0),
        "the subscription reaches the publisher"
    );
    ChatSubscription {
        track,
        received,
        sessions: (server_session, client_session),
        _broadcast: broadcast,
    }
}

/// [`chat_subscription`] over raw QUIC: the server publishes, the client subscribes.
pub(crate) fn raw_quic_chat(
    runtime: &BusyRuntime,
    client: &QuicConnection,
    server: &QuicConnection,
) -> ChatSubscription {
    chat_subscription(
        runtime,
        client,
        server,
        BindingSession::from(server.session()),
        BindingSession::from(client.session()),
    )
}
