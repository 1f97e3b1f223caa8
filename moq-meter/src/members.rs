//! The relay's clients: each its own host (endpoint, address), all on one runtime,
//! publishing a track of their own and reading the tracks of others, counting every
//! frame they read.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use moqx_net::model::{BroadcastProducer, GroupProducer, Origin, Track, TrackProducer};
use moqx_net::session::Session;
use moqx_runtime::client::{ClientConfig, ConnectError, Connecting, Target};

use crate::MeterError;

use crate::host::Host;
use crate::local::LocalRuntime;

/// The track every member publishes.
pub const TRACK: &str = "messages";

/// How long a member's handshake may take (real time: see [`Member::connect`]).
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// How the members reach the relay (on the command line, by its URL scheme).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// moq-lite over raw QUIC (`moqt://`).
    #[default]
    #[value(name = "moqt")]
    Quic,
    /// moq-lite over WebTransport over HTTP/3 (`https://`): what browsers and the
    /// deployed relay's own clients use.
    #[value(name = "https")]
    WebTransport,
}

impl Transport {
    /// The URL of the relay at `port` over this transport.
    fn url(self, port: u16) -> String {
        match self {
            Self::Quic => format!("moqt://localhost:{port}/"),
            Self::WebTransport => format!("https://localhost:{port}/"),
        }
    }

    /// Its name in a report.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Quic => "raw QUIC",
            Self::WebTransport => "WebTransport",
        }
    }
}

/// One client of the relay.
#[derive(Debug)]
pub struct Member {
    /// Its endpoint, at its own address.
    pub host: Host,
    /// Its session, once connected; or why it could not connect.
    session: Rc<RefCell<Option<Result<Session, ConnectError>>>>,
    publishing: Option<Publishing>,
    /// Where the broadcasts the relay announces to it arrive.
    discovered: Origin,
    /// The broadcasts it reads, and whether it subscribed to each yet.
    reads: Vec<(String, bool)>,
    /// Frames read, over every track it reads.
    received: Rc<Cell<u64>>,
}

/// A member's own broadcast and the group it is writing.
#[derive(Debug)]
struct Publishing {
    /// Published for the member's whole life.
    _broadcast: BroadcastProducer,
    track: TrackProducer,
    group: Option<GroupProducer>,
}

/// What a member does: the broadcast it publishes (if any), the announcements it asks the
/// relay for, and the broadcasts it reads.
#[derive(Debug, Clone)]
pub struct Role {
    /// The path it publishes its track at.
    pub publishes: Option<String>,
    /// The prefix of the broadcasts the relay announces to it.
    pub prefix: String,
    /// The broadcasts it reads (each once announced).
    pub reads: Vec<String>,
}

impl Member {
    /// A member at `address` connecting to the relay at `relay` over `transport` with
    /// `role`, its tasks on `runtime`.
    pub fn connect(
        address: SocketAddr,
        relay: SocketAddr,
        transport: Transport,
        role: Role,
        runtime: &LocalRuntime,
        now: Instant,
    ) -> Result<Self, MeterError> {
        let target = Target::parse(&transport.url(relay.port()))?;
        // Under callgrind everything runs fifty times slower, and a hundred handshakes
        // take the real seconds they take: the meter waits for them.
        let mut config = ClientConfig::default()
            .with_insecure_skip_verify()
            .with_handshake_timeout(HANDSHAKE_TIMEOUT);
        let discovered = Origin::new();
        config.session.subscribe = Some(discovered.clone());
        config.session.subscribe_prefix = role.prefix.as_str().into();
        let publishing = match &role.publishes {
            Some(path) => {
                let published = Origin::new();
                let broadcast = BroadcastProducer::new();
                let track = broadcast.create_track(Track::new(TRACK));
                published
                    .publish(path.as_str(), &broadcast)
                    .map_err(|error| MeterError::Publish(path.clone(), error.to_string()))?;
                config.session.publish = Some(published);
                Some(Publishing {
                    _broadcast: broadcast,
                    track,
                    group: None,
                })
            }
            None => None,
        };
        let mut endpoint = config.endpoint(&target, address, now)?;
        // No keep-alive, and so no silence probes: a client that hears nothing for a second
        // of real time sends a PING, and under callgrind a second is a few messages. The
        // relay's count would then depend on how fast the machine ran the meter.
        endpoint.set_keep_alive(None);
        let connection = endpoint.connect("localhost", relay, now)?;
        let mut connecting = Connecting::new(runtime.clone(), connection, relay, target, config);
        let session = Rc::new(RefCell::new(None));
        let connected = session.clone();
        runtime.spawn_task(async move {
            let result = moqx_kio::wait(|waiter| connecting.poll(waiter)).await;
            *connected.borrow_mut() = Some(result);
        });
        Ok(Self {
            host: Host::new(address, endpoint, runtime.clone()),
            session,
            publishing,
            discovered,
            reads: role.reads.into_iter().map(|path| (path, false)).collect(),
            received: Rc::default(),
        })
    }

    /// Whether its session is up; an error if it could not connect.
    pub fn is_connected(&self) -> Result<bool, String> {
        match &*self.session.borrow() {
            None => Ok(false),
            Some(Ok(_)) => Ok(true),
            Some(Err(error)) => Err(error.to_string()),
        }
    }

    /// Subscribes to each broadcast it reads that the relay announced since the last call;
    /// returns whether it now reads every one.
    pub fn subscribe_announced(&mut self) -> bool {
        let mut all = true;
        for (path, subscribed) in &mut self.reads {
            if *subscribed {
                continue;
            }
            let Some(broadcast) = self.discovered.consume_broadcast(path.as_str()) else {
                all = false;
                continue;
            };
            *subscribed = true;
            let received = self.received.clone();
            self.host.runtime.spawn_task(async move {
                let Ok(mut track) = broadcast.subscribe_track(TRACK).await else {
                    return;
                };
                while let Ok(Some(mut group)) = track.next_group().await {
                    while let Ok(Some(_frame)) = group.read_frame().await {
                        received.set(received.get() + 1);
                    }
                }
            });
        }
        all
    }

    /// Whether the relay subscribed to its track (it publishes one, and someone reads it).
    pub fn is_read(&self) -> bool {
        self.publishing
            .as_ref()
            .is_some_and(|publishing| publishing.track.consumer_count() > 0)
    }

    /// Writes one frame of `payload` to its track: the first of a new group when
    /// `new_group` (the last group finished first), else the next of the open one.
    pub fn publish(&mut self, payload: &Bytes, new_group: bool, timestamp: u64) {
        let Some(publishing) = &mut self.publishing else {
            return;
        };
        if new_group && let Some(group) = publishing.group.take() {
            group.finish();
        }
        let group = publishing
            .group
            .get_or_insert_with(|| publishing.track.append_group());
        group.write(timestamp, payload.clone());
    }

    /// Finishes the group it is writing, if any: a one-frame group (chat) is finished with
    /// its frame.
    pub fn finish_group(&mut self) {
        if let Some(group) = self.publishing.as_mut().and_then(|p| p.group.take()) {
            group.finish();
        }
    }

    /// Frames read so far.
    pub fn received(&self) -> u64 {
        self.received.get()
    }
}
