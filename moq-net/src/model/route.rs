//! Routes: how a broadcast reached an origin ([`Route`]): the hop ids of the relays it came
//! through, from the original publisher's side, and what serving it from here costs. An
//! origin ranks a path's publications by their routes (`publications.rs`); two routes
//! with the same non-zero first hop carry the same publisher's broadcast, so a
//! subscription can move from one to the other at a group boundary (a splice; see
//! [`FollowedTrack`](super::FollowedTrack)).

/// How a broadcast reached this origin, and what serving it from here costs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Route {
    /// The hop (origin) ids of the relays it came through, the original publisher's
    /// relay first; empty for a broadcast published here.
    pub hops: Vec<u64>,
    /// What subscribing through this route costs, in the deployment's units (each link
    /// adds its price); 0 for a broadcast published here.
    pub cost: u64,
}

impl Route {
    /// A route through `hops` at one unit per hop: cost is hop count.
    pub fn through(hops: Vec<u64>) -> Self {
        let cost = hops.len() as u64;
        Self { hops, cost }
    }

    /// The original publisher's relay (the first hop); 0 for unknown, which matches
    /// nothing.
    pub fn publisher(&self) -> u64 {
        self.hops.first().copied().unwrap_or(0)
    }

    /// Whether the route passes through the relay `hop` (never for 0, "unknown").
    pub fn passes_through(&self, hop: u64) -> bool {
        hop != 0 && self.hops.contains(&hop)
    }

    /// Whether a subscription may move between this route and `other` at a group
    /// boundary: both carry the broadcast of the same, known, original publisher.
    pub fn same_publisher(&self, other: &Route) -> bool {
        self.publisher() != 0 && self.publisher() == other.publisher()
    }
}
