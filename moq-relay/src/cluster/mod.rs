//! Relays as one network: this relay's links to the other relays of its cluster.
//!
//! A cluster link is an ordinary moq-lite session between two relays, carrying both
//! directions into each relay's one [`Origin`]: each asks the other for every broadcast
//! it knows (`ANNOUNCE_REQUEST("")`) and learns each one's route, the hop ids of the
//! relays it came through. A relay drops an announcement whose route holds its own id
//! and never offers the peer a route through the peer itself, so a mesh of any shape
//! carries every broadcast without loops. A relay subscribes upstream only when a local
//! viewer asks, once per track however many ask, and serves them all from its cache
//! (`moqx_net::session` does all of this; this module makes the links).
//!
//! - **Outbound:** every URL of `cluster.connect` is dialed and redialed for as long as
//!   the relay runs, with jittered backoff ([`moqx_net::backoff`]: 1 s doubling to 10 s).
//!   A dialed peer is trusted: the relay chose it and verified its certificate.
//! - **Inbound:** a session whose token grants everything at the root (or any session,
//!   on a relay with no auth key) is a peer ([`crate::auth::Grant::peer`]): its routes
//!   rank its broadcasts. A client's never do.
//! - **Gossip** (`cluster.node` + `cluster.mesh`): the relay advertises its own URL as an
//!   empty broadcast at `.internal/origins/<node>`, which every link carries like any
//!   other, and dials each node advertised there whose URL sorts after its own, so that
//!   each pair of relays opens one link (`gossip.rs`). A node gone from the advertisements
//!   for a minute is no longer dialed.
//! - **Linger** (`cluster.linger_secs`, 5 s): a broadcast whose last route was lost (a
//!   link or a publisher's session died, not closed) stays announced that long, and the
//!   subscriptions to it wait: a publisher back by any route within it is taken in place
//!   ([`moqx_net::model::Origin::linger`]).
//! - **Failure detection:** peer links keep alive three times per
//!   `cluster.peer_timeout_secs` (2 s by default) and die after it, withdrawing their
//!   routes; the relay's other routes take over.
//!
//! [`Cluster::topology`] is what `GET /cluster` shows and [`Cluster::render_metrics`]
//! the `moq_relay_cluster_*` part of `/metrics`.

mod config;
mod dial;
mod gossip;
mod linger;
mod view;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use moqx_net::model::Origin;
use moqx_net::session::Session;
use moqx_runtime::client::ClientConfig;

pub use config::{ClusterSection, MAX_CLUSTER_ID, MESH_PREFIX, NodeUrl, PeerUrl};
pub use view::{LinkView, Topology};

/// This relay's cluster: its id, the peers it dials and the peers that dialed it.
#[derive(Debug)]
pub struct Cluster {
    id: u64,
    /// The peers it dials: those configured, then those gossip found.
    outbound: Mutex<Vec<Arc<OutboundPeer>>>,
    inbound: Mutex<BTreeMap<u64, InboundPeer>>,
    /// How every dial is configured (a discovered peer's too), and the token for dials.
    base: ClientConfig,
    token: Option<String>,
    /// This relay's own URL, when it gossips.
    node: Option<NodeUrl>,
    /// How long a broadcast whose last route was lost stays announced (zero: not at all).
    linger: std::time::Duration,
    /// Set when the relay drains: no more dials, GOAWAY to the links up now.
    stopping: tokio::sync::watch::Sender<bool>,
}

/// A peer this relay dials.
#[derive(Debug)]
struct OutboundPeer {
    url: PeerUrl,
    /// The peer's URL without its query: what gossip names it by.
    identity: Option<NodeUrl>,
    /// Found by gossip (else configured).
    discovered: bool,
    /// How its dials are configured.
    client: ClientConfig,
    state: Mutex<OutboundState>,
    /// Set to stop dialing it: the relay drains, or gossip forgot the peer.
    stop: tokio::sync::watch::Sender<bool>,
}

/// Where an outbound link stands.
#[derive(Debug, Default)]
struct OutboundState {
    /// The session while the link is up.
    session: Option<Session>,
    /// When the link came up, or when the current dial or wait began.
    since: Option<Instant>,
    /// Dials that reached an established session.
    connects: u64,
    /// Dials that failed, and sessions that ended.
    failures: u64,
    /// Why the last dial failed or the last session ended.
    last_error: Option<String>,
    /// Dialing now (else waiting to redial, when not up).
    dialing: bool,
}

/// A peer that dialed this relay.
#[derive(Debug, Clone)]
struct InboundPeer {
    remote: Option<SocketAddr>,
    session: Option<Session>,
    since: Instant,
}

impl Cluster {
    /// The cluster of a relay with hop id `id`, dialing `peers` with `base` (the relay's
    /// session limits, its accepted versions, the peer links' QUIC limits) once started,
    /// presenting `token` to the peers gossip finds, advertising `node` if it gossips,
    /// and keeping a broadcast whose last route was lost announced for `linger`.
    pub fn new(
        id: u64,
        peers: Vec<PeerUrl>,
        base: ClientConfig,
        token: Option<String>,
        node: Option<NodeUrl>,
        linger: std::time::Duration,
    ) -> Self {
        let outbound = peers
            .into_iter()
            .map(|url| OutboundPeer::new(url, &base, false))
            .collect();
        Self {
            id,
            outbound: Mutex::new(outbound),
            inbound: Mutex::default(),
            base,
            token,
            node,
            linger,
            stopping: tokio::sync::watch::Sender::new(false),
        }
    }

    /// This relay's hop id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Starts dialing every peer, each link publishing into and serving from `origin`,
    /// on the current tokio runtime; each redials until [`stop`](Self::stop). A gossiping
    /// relay also advertises itself and dials the nodes it discovers.
    pub fn start(self: &Arc<Self>, origin: &Origin) {
        let peers = lock(&self.outbound).clone();
        for peer in peers {
            self.dial(&peer, origin);
        }
        if !self.linger.is_zero() {
            tokio::spawn(linger::run(
                origin.clone(),
                self.linger,
                self.stopping.subscribe(),
            ));
        }
        if let Some(node) = &self.node {
            tracing::info!(%node, "cluster: gossiping (advertising this node, dialing those found)");
            tokio::spawn(gossip::run(
                self.clone(),
                origin.clone(),
                node.clone(),
                self.stopping.subscribe(),
            ));
        }
    }

    /// Starts the supervised dial of `peer`, its link on `origin`.
    fn dial(&self, peer: &Arc<OutboundPeer>, origin: &Origin) {
        let mut client = peer.client.clone();
        client.session = {
            let mut session_config = client.session;
            session_config.publish = Some(origin.clone());
            session_config.subscribe = Some(origin.clone());
            session_config.origin_id = self.id;
            session_config.trust_peer_routes = true;
            session_config
        };
        tokio::spawn(dial::supervise(peer.clone(), client, peer.stop.subscribe()));
    }

    /// Whether a peer named `node` is dialed now (configured or discovered).
    fn dials_node(&self, node: &NodeUrl) -> bool {
        lock(&self.outbound)
            .iter()
            .any(|peer| peer.identity.as_ref() == Some(node))
    }

    /// Starts dialing `node`, found by gossip, unless it is dialed already.
    fn add_discovered(&self, node: &NodeUrl, origin: &Origin) {
        if self.dials_node(node) || *self.stopping.borrow() {
            return;
        }
        let url = match PeerUrl::parse(node.as_str(), self.token.as_deref()) {
            Ok(url) => url,
            Err(problem) => {
                tracing::warn!(%node, %problem, "cluster: cannot dial a node gossip found");
                return;
            }
        };
        tracing::info!(%node, "cluster: dialing a node gossip found");
        let peer = OutboundPeer::new(url, &self.base, true);
        lock(&self.outbound).push(peer.clone());
        self.dial(&peer, origin);
    }

    /// Stops dialing `node`, found by gossip and advertised no more (a node configured
    /// in `cluster.connect` is dialed whatever gossip says).
    fn forget_discovered(&self, node: &NodeUrl) {
        let mut outbound = lock(&self.outbound);
        outbound.retain(|peer| {
            let forget = peer.discovered && peer.identity.as_ref() == Some(node);
            if forget {
                tracing::info!(%node, "cluster: a node gossip found is gone: no longer dialed");
                peer.stop.send_replace(true);
                if let Some(session) = lock(&peer.state).session.take() {
                    session.close(moqx_net::Error::Cancel);
                }
            }
            !forget
        });
    }

    /// Stops redialing, and tells every peer linked now that this relay is going away
    /// (GOAWAY): they move their subscriptions to other routes before the drain closes
    /// the links.
    pub fn stop(&self) {
        self.stopping.send_replace(true);
        for peer in lock(&self.outbound).iter() {
            peer.stop.send_replace(true);
            if let Some(session) = lock(&peer.state).session.clone() {
                session.goaway("");
            }
        }
    }

    /// The outbound links up now.
    pub fn outbound_sessions(&self) -> Vec<Session> {
        lock(&self.outbound)
            .iter()
            .filter_map(|peer| lock(&peer.state).session.clone())
            .collect()
    }

    /// Records that the session `id` from `remote` is a peer (its grant said so).
    pub fn inbound_opened(&self, id: u64, remote: Option<SocketAddr>) {
        tracing::info!(?remote, session = id, "a cluster peer connected");
        lock(&self.inbound).insert(
            id,
            InboundPeer {
                remote,
                session: None,
                since: Instant::now(),
            },
        );
    }

    /// Gives the inbound peer `id` its session handle, once the relay has it; a session
    /// that is not a peer is left alone.
    pub fn inbound_session(&self, id: u64, session: &Session) {
        if let Some(peer) = lock(&self.inbound).get_mut(&id) {
            peer.session = Some(session.clone());
        }
    }

    /// Forgets the session `id` if it was a peer (it ended).
    pub fn inbound_closed(&self, id: u64) {
        if let Some(peer) = lock(&self.inbound).remove(&id) {
            tracing::info!(remote = ?peer.remote, session = id, "a cluster peer left");
        }
    }
}

impl OutboundPeer {
    /// A peer at `url`, dialed with `base` (its pinned certificate and price from the URL).
    fn new(url: PeerUrl, base: &ClientConfig, discovered: bool) -> Arc<Self> {
        let mut client = base.clone();
        client.fingerprint = url.fingerprint.or(base.fingerprint);
        if let Some(cost) = url.cost {
            client.session.link_cost = cost;
        }
        let identity = url::Url::parse(&url.dial).ok().and_then(|mut bare| {
            bare.set_query(None);
            NodeUrl::parse(bare.as_str()).ok()
        });
        Arc::new(Self {
            url,
            identity,
            discovered,
            client,
            state: Mutex::default(),
            stop: tokio::sync::watch::Sender::new(false),
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere leaves the state readable: it is bookkeeping, not an invariant.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
