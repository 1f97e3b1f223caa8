//! What the cluster shows: `GET /cluster` (this node, its links, the routes of every
//! broadcast it knows) and the `moq_relay_cluster_*` metrics.

use std::fmt::Write as _;
use std::time::Instant;

use moqx_net::model::Origin;
use moqx_net::session::Session;
use serde::Serialize;

use super::{Cluster, lock};

/// `GET /cluster`: this relay's view of the network.
#[derive(Debug, Clone, Serialize)]
pub struct Topology {
    /// This relay's hop id.
    pub id: u64,
    /// This relay's own URL, when it gossips (`cluster.node` with `cluster.mesh`).
    pub node: Option<String>,
    /// Its links to other relays, the ones it dials first.
    pub links: Vec<LinkView>,
    /// Every broadcast this relay knows, with the route it serves it by: the hop ids
    /// from the original publisher's relay to the one that handed it here (empty for a
    /// broadcast published on this relay).
    pub routes: Vec<RouteView>,
}

/// One link to another relay.
#[derive(Debug, Clone, Serialize)]
pub struct LinkView {
    /// `"out"` for a peer this relay dials, `"in"` for one that dialed it.
    pub direction: &'static str,
    /// The dialed URL (credentials redacted), or the remote address of an inbound peer.
    pub peer: String,
    /// `"up"`, `"dialing"` or `"waiting"` (to redial).
    pub state: &'static str,
    /// Whether gossip found this peer (else it is configured, or it dialed in).
    pub discovered: bool,
    /// Seconds in that state.
    pub for_secs: f64,
    /// The moq-lite version of the session, while up.
    pub version: Option<String>,
    /// The smoothed round-trip time, in milliseconds, while up.
    pub rtt_ms: Option<f64>,
    /// Broadcasts the peer announced over the link (routes through it), while up.
    pub routes: u64,
    /// Subscriptions this relay holds to the peer: tracks local viewers read through it.
    pub upstream_subscriptions: u64,
    /// The peer's subscriptions this relay serves.
    pub downstream_subscriptions: u64,
    /// Bytes sent and received on the link's current session.
    pub bytes_sent: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Dials that reached a session (outbound only).
    pub connects: u64,
    /// Dials that failed and sessions that ended (outbound only).
    pub failures: u64,
    /// Why the last dial failed or the last session ended (outbound only).
    pub last_error: Option<String>,
}

/// The route of one broadcast.
#[derive(Debug, Clone, Serialize)]
pub struct RouteView {
    /// The broadcast's path.
    pub path: String,
    /// The hop ids it came through.
    pub hops: Vec<u64>,
}

impl Cluster {
    /// This relay's view of the network, with the routes of `origin`'s broadcasts.
    pub fn topology(&self, origin: &Origin) -> Topology {
        let now = Instant::now();
        let mut links = Vec::new();
        for peer in lock(&self.outbound).iter() {
            let state = lock(&peer.state);
            let status = match (&state.session, state.dialing) {
                (Some(_), _) => "up",
                (None, true) => "dialing",
                (None, false) => "waiting",
            };
            let mut link = LinkView::new("out", peer.url.display.clone(), status);
            link.discovered = peer.discovered;
            link.for_secs = state
                .since
                .map_or(0.0, |since| now.duration_since(since).as_secs_f64());
            link.connects = state.connects;
            link.failures = state.failures;
            link.last_error = state.last_error.clone();
            if let Some(session) = &state.session {
                fill(&mut link, session);
            }
            links.push(link);
        }
        for (peer_id, peer) in lock(&self.inbound).iter() {
            let remote = peer.remote.map_or_else(
                || format!("session {}", peer_id),
                |remote| remote.to_string(),
            );
            let mut link = LinkView::new("in", remote, "up");
            link.for_secs = now.duration_since(peer.since).as_secs_f64();
            if let Some(session) = &peer.session {
                fill(&mut link, session);
            }
            links.push(link);
        }
        let routes = origin
            .routes("")
            .into_iter()
            .map(|(path, hops)| RouteView {
                path: path.to_string(),
                hops,
            })
            .collect();
        Topology {
            id: self.id,
            node: self.node.as_ref().map(|node| node.as_str().to_owned()),
            links,
            routes,
        }
    }

    /// Appends the `moq_relay_cluster_*` metrics to a Prometheus text exposition.
    pub fn render_metrics(&self, out: &mut String, origin: &Origin) {
        let topology = self.topology(origin);
        let mut metric = |name: &str, kind: &str, help: &str, value: &dyn Fn(&LinkView) -> f64| {
            let _ = writeln!(out, "# HELP moq_relay_cluster_{name} {help}");
            let _ = writeln!(out, "# TYPE moq_relay_cluster_{name} {kind}");
            for link in &topology.links {
                let _ = writeln!(
                    out,
                    "moq_relay_cluster_{name}{{direction=\"{}\",peer=\"{}\"}} {}",
                    link.direction,
                    escape(&link.peer),
                    value(link)
                );
            }
        };
        metric(
            "peer_up",
            "gauge",
            "Whether the link to a peer relay is up (1) or not (0).",
            &|link| f64::from(u8::from(link.state == "up")),
        );
        metric(
            "peer_rtt_seconds",
            "gauge",
            "The link's smoothed round-trip time (0 while down).",
            &|link| link.rtt_ms.unwrap_or(0.0) / 1000.0,
        );
        metric(
            "peer_routes",
            "gauge",
            "Broadcasts the peer announces over the link now.",
            &|link| link.routes as f64,
        );
        metric(
            "peer_upstream_subscriptions",
            "gauge",
            "Subscriptions this relay holds to the peer now (one per track local viewers read through it).",
            &|link| link.upstream_subscriptions as f64,
        );
        metric(
            "peer_downstream_subscriptions",
            "gauge",
            "The peer's subscriptions this relay serves now.",
            &|link| link.downstream_subscriptions as f64,
        );
        metric(
            "peer_bytes_sent",
            "gauge",
            "Bytes sent on the link's current session.",
            &|link| link.bytes_sent as f64,
        );
        metric(
            "peer_bytes_received",
            "gauge",
            "Bytes received on the link's current session.",
            &|link| link.bytes_received as f64,
        );
        metric(
            "peer_connects_total",
            "counter",
            "Dials of the peer that reached a session (outbound links).",
            &|link| link.connects as f64,
        );
        metric(
            "peer_failures_total",
            "counter",
            "Dials of the peer that failed, and its sessions that ended (outbound links).",
            &|link| link.failures as f64,
        );
    }
}

impl LinkView {
    /// A link with nothing measured yet.
    fn new(direction: &'static str, peer: String, state: &'static str) -> Self {
        Self {
            direction,
            peer,
            state,
            discovered: false,
            for_secs: 0.0,
            version: None,
            rtt_ms: None,
            routes: 0,
            upstream_subscriptions: 0,
            downstream_subscriptions: 0,
            bytes_sent: 0,
            bytes_received: 0,
            connects: 0,
            failures: 0,
            last_error: None,
        }
    }
}

/// What a live session adds to its link's view.
fn fill(link: &mut LinkView, session: &Session) {
    let (stats, counters) = (session.stats(), session.counters());
    link.version = Some(session.version().to_string());
    link.rtt_ms = stats.rtt.map(|rtt| rtt.as_secs_f64() * 1000.0);
    link.routes = counters.announced_broadcasts;
    link.upstream_subscriptions = counters.upstream_subscriptions;
    link.downstream_subscriptions = counters.subscriptions_active;
    link.bytes_sent = stats.bytes_sent;
    link.bytes_received = stats.bytes_received;
}

/// A Prometheus label value: backslash, quote and newline escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
