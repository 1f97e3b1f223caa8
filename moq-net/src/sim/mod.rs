//! Whole MoQ topologies in virtual time, for testing an application the way this project
//! tests itself (feature `test-runtime`).
//!
//! A [`Sim`] holds relays, clients and the links between them on one seeded
//! [`TestRuntime`]: sessions are the real session machines, links are in-memory
//! transports with the latency, bandwidth and faults of a [`LinkConfig`], and time is
//! virtual: a test that covers a minute of a relay network runs in milliseconds, and
//! runs the same way every time for the same seed.
//!
//! # A guide
//!
//! 1. **Build the topology**: [`Sim::new`] with a seed and where virtual time starts, then [`relay`](Sim::relay),
//!    [`client`](Sim::client) (connected to a relay) and [`link`](Sim::link) (two relays
//!    forwarding each other's broadcasts), chained. [`with_link`](Sim::with_link) sets
//!    the latency, bandwidth and faults of the links made after it.
//! 2. **Publish and subscribe** as clients: [`publish`](Sim::publish) gives the track to
//!    write to, [`subscribe`](Sim::subscribe) a [`Received`] that records every frame the
//!    client reads (it follows the track across lost routes). Or take the client's
//!    origins ([`publisher_origin`](Sim::publisher_origin),
//!    [`subscriber_origin`](Sim::subscriber_origin)) and use the model directly.
//! 3. **Run** until something is true ([`run_until`](Sim::run_until), which jumps from
//!    timer to timer) or for a while ([`run_for`](Sim::run_for)). Your own tasks (an
//!    application's client loop, a scripted event) run on the same clock:
//!    [`spawn`](Sim::spawn) them and let them [`sleep`](Sim::sleep).
//! 4. **Break things**: [`partition`](Sim::partition) cuts every link between two nodes
//!    (both sides lose the connection), [`heal`](Sim::heal) connects them again; a
//!    [`LinkConfig`] adds loss, resets, reordering and links that drop.
//! 5. **Replay a failure**: run the test in [`seeded`], and a failure names its seed; run
//!    it again with `MOQ_TEST_SEED=<seed>` and the same run happens again, byte for byte.
//!
//! ```
//! use std::time::Duration;
//! use moqx_net::sim::Sim;
//!
//! // The test reads the clock once, for where virtual time starts.
//! let epoch = std::time::Instant::now();
//! let mut sim = Sim::new(1, epoch).relay("a").client("alice", "a").client("bob", "a");
//! let mut chat = sim.publish("alice", "room/alice", "chat");
//! let heard = sim.subscribe("bob", "room/alice", "chat");
//! assert!(sim.run_until(Duration::from_secs(1), || chat.consumer_count() > 0));
//! moqx_net::sim::send(&mut chat, 0, "hello");
//! assert!(sim.run_until(Duration::from_secs(1), || heard.texts() == ["hello"]));
//! ```
//!
//! The relays here are what a relay is at heart (sessions sharing one origin), without a
//! real relay's policy (tokens, limits per client, metrics): give a relay's sessions an
//! [`Authorize`](crate::session::Authorize) hook through [`Relay::base`] to test
//! authorization.

mod relay;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

pub use relay::{Received, Relay, follow_track, publisher, read_track, send, subscriber};

use crate::model::{BroadcastProducer, Origin, Track, TrackProducer};
use crate::runtime::Instant;
use crate::runtime::test::{LinkConfig, TestRuntime, TestTransport};
use crate::session::{Session, SessionConfig};

/// A second of virtual time.
pub const SECOND: Duration = Duration::from_secs(1);

/// A topology of relays and clients in virtual time: see the [module docs](self).
///
/// Nodes are named; a method given a name that is not a node of the right kind panics
/// (a test's mistake, said at once).
pub struct Sim {
    runtime: TestRuntime,
    relays: BTreeMap<String, Relay>,
    clients: BTreeMap<String, Client>,
    links: Vec<Link>,
    link: LinkConfig,
}

/// A client: the relay it connects to, what it publishes, where it receives.
struct Client {
    relay: String,
    publish: Origin,
    subscribe: Origin,
    /// Kept so that its broadcasts live as long as the sim.
    broadcasts: Vec<BroadcastProducer>,
    session: Option<Session>,
}

/// A link between two nodes (relays, or a client and its relay) and its handle.
struct Link {
    ends: (String, String),
    transport: TestTransport,
}

impl Link {
    /// Whether it joins `a` and `b`, either way round.
    fn joins(&self, a: &str, b: &str) -> bool {
        let (x, y) = (self.ends.0.as_str(), self.ends.1.as_str());
        (x, y) == (a, b) || (x, y) == (b, a)
    }
}

impl Sim {
    /// An empty topology whose faults are drawn from `seed`, its virtual time starting at
    /// `epoch` (any instant: a test reads the clock once, as a driver would; the sim never
    /// does). [`seeded`] runs a test with the seed `MOQ_TEST_SEED` names, for replay.
    pub fn new(seed: u64, epoch: Instant) -> Self {
        Self::on(TestRuntime::new(seed, epoch))
    }

    /// An empty topology on `runtime`.
    pub fn on(runtime: TestRuntime) -> Self {
        Self {
            runtime,
            relays: BTreeMap::new(),
            clients: BTreeMap::new(),
            links: Vec::new(),
            link: LinkConfig::default(),
        }
    }

    /// Links made from now on are configured as `link` (latency, bandwidth, faults).
    pub fn with_link(mut self, link: LinkConfig) -> Self {
        self.link = link;
        self
    }

    /// Adds a relay named `name` (with a hop id of its own).
    pub fn relay(mut self, name: &str) -> Self {
        self.assert_new(name);
        let id = self.relays.len() as u64 + 1;
        self.relays.insert(name.to_owned(), Relay::with_id(id));
        self
    }

    /// Adds a client named `name`, connected to the relay `relay`, publishing nothing yet
    /// and receiving whatever the relay announces.
    pub fn client(mut self, name: &str, relay: &str) -> Self {
        self.assert_new(name);
        let client = Client {
            relay: relay.to_owned(),
            publish: Origin::new(),
            subscribe: Origin::new(),
            broadcasts: Vec::new(),
            session: None,
        };
        self.clients.insert(name.to_owned(), client);
        self.connect_client(name);
        self
    }

    /// Links the relays `a` and `b`: each forwards the other's broadcasts.
    pub fn link(mut self, a: &str, b: &str) -> Self {
        self.link_relays(a, b);
        self
    }

    /// The runtime everything runs on.
    pub fn runtime(&self) -> &TestRuntime {
        &self.runtime
    }

    /// Virtual time since the sim was made.
    pub fn elapsed(&self) -> Duration {
        self.runtime.elapsed()
    }

    /// The relay `name`.
    pub fn relay_node(&self, name: &str) -> &Relay {
        self.relays
            .get(name)
            .unwrap_or_else(|| panic!("no relay named {name:?}"))
    }

    /// What the client `name` publishes: publish a broadcast here to offer it.
    pub fn publisher_origin(&self, name: &str) -> Origin {
        self.client_node(name).publish.clone()
    }

    /// Where the client `name` receives: its relay's broadcasts are announced here.
    pub fn subscriber_origin(&self, name: &str) -> Origin {
        self.client_node(name).subscribe.clone()
    }

    /// The client `name`'s session (its latest, after a [`heal`](Self::heal)).
    pub fn session(&self, name: &str) -> Session {
        self.client_node(name)
            .session
            .clone()
            .expect("a client has a session")
    }

    /// Publishes a broadcast at `path` from the client `client`, with one track
    /// `track`: the track to write to.
    pub fn publish(&mut self, client: &str, path: &str, track: &str) -> TrackProducer {
        let node = self.client_mut(client);
        let broadcast = BroadcastProducer::new();
        let producer = broadcast.create_track(Track::new(track));
        node.publish
            .publish(path, &broadcast)
            .unwrap_or_else(|error| panic!("publishing {path:?}: {error}"));
        node.broadcasts.push(broadcast);
        producer
    }

    /// Follows the track `track` of the broadcast at `path` as the client `client`
    /// ([`follow_track`]): what it reads is recorded in the returned [`Received`].
    pub fn subscribe(&self, client: &str, path: &str, track: &str) -> Received {
        follow_track(
            &self.runtime,
            &self.client_node(client).subscribe,
            path,
            track,
        )
    }

    /// Cuts every link between the nodes `a` and `b` (relays, or a client and its
    /// relay): both ends lose the connection now, and nothing in flight arrives.
    pub fn partition(&mut self, a: &str, b: &str) {
        let mut cut = 0;
        self.links.retain(|link| {
            let between = link.joins(a, b);
            if between {
                link.transport.cut();
                cut += 1;
            }
            !between
        });
        assert!(cut > 0, "no link between {a:?} and {b:?} to cut");
        self.runtime.run_until_stalled();
    }

    /// Connects `a` and `b` again after a [`partition`](Self::partition): two relays are
    /// linked anew; a client connects to its relay with a new session (its origins, and
    /// so its broadcasts and its followed tracks, carry on).
    pub fn heal(&mut self, a: &str, b: &str) {
        assert!(
            !self.linked(a, b),
            "{a:?} and {b:?} are linked: heal what a partition cut"
        );
        if self.relays.contains_key(a) && self.relays.contains_key(b) {
            self.link_relays(a, b);
            return;
        }
        let (client, relay) = if self.clients.contains_key(a) {
            (a, b)
        } else {
            (b, a)
        };
        assert_eq!(
            self.client_node(client).relay,
            relay,
            "{client:?} is not a client of {relay:?}"
        );
        self.connect_client(client);
    }

    /// Runs every task and timer for `duration` of virtual time.
    pub fn run_for(&self, duration: Duration) {
        self.runtime.advance(duration);
    }

    /// Runs, jumping from timer to timer, until `done` is true (then `true`), or until
    /// `limit` of virtual time passed or nothing is left to run (then `false`).
    pub fn run_until(&self, limit: Duration, done: impl FnMut() -> bool) -> bool {
        self.runtime.run_until(limit, done)
    }

    /// Runs `task` on the sim's clock, beside the sessions: an application's own loop,
    /// or a scripted event.
    pub fn spawn(&self, task: impl Future<Output = ()> + 'static) {
        self.runtime.spawn_task(task);
    }

    /// Waits `duration` of virtual time, in a task of the sim.
    pub fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + 'static {
        self.runtime.sleep(duration)
    }

    /// Panics if a node is named `name` already.
    fn assert_new(&self, name: &str) {
        assert!(
            !self.relays.contains_key(name) && !self.clients.contains_key(name),
            "a node named {name:?} exists already"
        );
    }

    /// Whether a link joins `a` and `b`.
    fn linked(&self, a: &str, b: &str) -> bool {
        self.links.iter().any(|link| link.joins(a, b))
    }

    fn client_node(&self, name: &str) -> &Client {
        self.clients
            .get(name)
            .unwrap_or_else(|| panic!("no client named {name:?}"))
    }

    fn client_mut(&mut self, name: &str) -> &mut Client {
        self.clients
            .get_mut(name)
            .unwrap_or_else(|| panic!("no client named {name:?}"))
    }

    fn connect_client(&mut self, name: &str) {
        let client = self.client_node(name);
        let relay_name = client.relay.clone();
        let config = SessionConfig::default()
            .with_publisher(&client.publish)
            .with_subscriber(&client.subscribe);
        let link = self.link.clone();
        let relay = self
            .relays
            .get_mut(&relay_name)
            .unwrap_or_else(|| panic!("no relay named {relay_name:?}"));
        relay.link = link;
        let (session, transport) = relay.connect_over(&self.runtime, config);
        self.client_mut(name).session = Some(session);
        self.links.push(Link {
            ends: (name.to_owned(), relay_name),
            transport,
        });
    }

    fn link_relays(&mut self, a: &str, b: &str) {
        let mut first = self
            .relays
            .remove(a)
            .unwrap_or_else(|| panic!("no relay named {a:?}"));
        let second = self.relays.get_mut(b);
        let Some(second) = second else {
            panic!("no relay named {b:?}");
        };
        let transport = first.link_over(&self.runtime, second, self.link.clone());
        self.relays.insert(a.to_owned(), first);
        self.links.push(Link {
            ends: (a.to_owned(), b.to_owned()),
            transport,
        });
    }
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("seed", &self.runtime.seed())
            .field("elapsed", &self.runtime.elapsed())
            .field("relays", &self.relays.keys().collect::<Vec<_>>())
            .field("clients", &self.clients.keys().collect::<Vec<_>>())
            .field("links", &self.links.len())
            .finish()
    }
}

/// Runs `test` on an empty topology seeded from `MOQ_TEST_SEED` (or `default_seed`), its
/// virtual time starting at `epoch`; if the test panics, the panic names the seed, so
/// that `MOQ_TEST_SEED=<seed>` replays the same run (`runtime::test::seeded`).
pub fn seeded(default_seed: u64, epoch: Instant, test: impl FnOnce(Sim)) {
    crate::runtime::test::seeded(default_seed, epoch, |runtime| {
        test(Sim::on(runtime.clone()))
    });
}
