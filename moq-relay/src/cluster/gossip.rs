//! Gossip discovery: a relay advertises its own URL as an empty broadcast at
//! `.internal/origins/<node>` and dials the nodes advertised there.
//!
//! The advertisements are ordinary broadcasts: every cluster link carries them with the
//! rest, so a relay that reaches any node of the mesh hears of all of them. Of each pair,
//! only the relay whose URL sorts first dials (the link carries both directions), and a
//! relay with `node` and `mesh` but no `connect` is a rendezvous point that dials nobody
//! until others arrive.
//!
//! An advertisement that ends (its node stopped, or the route it came by is being
//! replaced) is not acted on at once: routes flap while a mesh reconverges. A node whose
//! advertisement stays gone for [`FORGET_AFTER`] is no longer dialed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use moqx_net::model::{Announcement, BroadcastProducer, Origin, Path};
use tokio::time::Instant;

use super::{Cluster, MESH_PREFIX, NodeUrl};

/// How long a discovered node's advertisement may stay gone before it is no longer dialed.
pub(super) const FORGET_AFTER: Duration = Duration::from_secs(60);

/// How often nodes gone for [`FORGET_AFTER`] are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// Advertises `own` on `origin` and dials what gossip finds, until `stopping` turns true
/// (the relay drains: the advertisement is withdrawn, so that no relay dials it anew).
pub(super) async fn run(
    cluster: Arc<Cluster>,
    origin: Origin,
    own: NodeUrl,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let advertisement = BroadcastProducer::new();
    if let Err(error) = origin.publish(own.advertised_path(), &advertisement) {
        tracing::warn!(%own, %error, "cluster: cannot advertise this node: gossip is off");
        return;
    }
    let prefix = Path::new(MESH_PREFIX);
    let mut announced = origin.announced(prefix.clone());
    let mut gone: HashMap<NodeUrl, Instant> = HashMap::new();
    let mut sweep = tokio::time::interval(SWEEP_EVERY);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        let announcement = tokio::select! {
            announcement = announced.next() => announcement,
            _ = sweep.tick() => {
                let now = Instant::now();
                gone.retain(|node, since| {
                    let forget = now.duration_since(*since) >= FORGET_AFTER;
                    if forget {
                        cluster.forget_discovered(node);
                    }
                    !forget
                });
                continue;
            }
            _ = stopping.wait_for(|stop| *stop) => break,
        };
        let (path, active) = match &announcement {
            Announcement::Active { path, .. } => (path, true),
            Announcement::Ended { path } => (path, false),
        };
        let Some(node) = path
            .strip_prefix(&prefix)
            .and_then(NodeUrl::from_advertised)
        else {
            tracing::debug!(%path, "cluster: not a node advertisement");
            continue;
        };
        if node == own {
            continue;
        }
        if active {
            gone.remove(&node);
            // Of each pair, the relay whose URL sorts first dials.
            if own < node {
                cluster.add_discovered(&node, &origin);
            } else {
                tracing::debug!(%node, "cluster: gossip found a node that dials this one");
            }
        } else {
            tracing::debug!(%node, "cluster: a node's advertisement ended");
            gone.entry(node).or_insert_with(Instant::now);
        }
    }
    drop(advertisement);
    tracing::debug!(%own, "cluster: gossip stopped, this node's advertisement withdrawn");
}
