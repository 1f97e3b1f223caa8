//! Which of several publications at one path serves it: an origin's table of them,
//! ranked by their [`Route`]s.
//!
//! In a network of relays one broadcast can reach a relay by several routes (a mesh), and
//! a path can be taken over by another publisher. Each publication at a path carries a
//! [`Route`]: the hop ids of the relays it came through, from the original publisher's
//! side, and what serving it from here costs. An origin keeps a path's publications in
//! preference order, as deployed relays rank them (spec: moq-lite-06, "Routing"):
//!
//! 1. lowest cost (each link adds its price; a draining peer prices itself out);
//! 2. then, for routes through other relays, fewest hops;
//! 3. then, for those, a hash of the path and the hop ids (FNV-1a, fixed seed), so that
//!    relays agree on which of two equal routes to use instead of each picking its own;
//! 4. then the newest, so that a reconnecting publisher replaces its stale session.
//!
//! A listener (an announce stream to a peer) is shown the best route that does not pass
//! through that peer: a peer the serving route flows through still hears of the best
//! standby, which is what lets it fail over when its own copy dies.
//!
//! Two routes with the same non-zero first hop carry the same publisher's broadcast:
//! a subscription can move from one to the other at a group boundary (a splice; see
//! [`FollowedTrack`](super::FollowedTrack)). Any other pair is a replacement.

use super::broadcast::BroadcastSource;
use super::route::Route;

/// One publication at a path, with what its rank is read from (copied when it was
/// published or its route last changed, so that ranking locks no broadcast).
#[derive(Debug)]
pub(crate) struct Publication {
    /// Unique in its origin; a newer publication has a larger id.
    pub(crate) id: u64,
    pub(crate) route: Route,
    /// Bumped by every change of the broadcast's route: a listener is told of a change of
    /// its best route's hops or cost as of a new announcement.
    pub(crate) version: u64,
    /// The FNV-1a hash of the path and the route's hops (rank 3).
    pub(crate) tiebreak: u64,
    pub(crate) broadcast: BroadcastSource,
}

/// What identifies a path's state as one listener was told it: which publication, and
/// which version of its route.
pub(crate) type Best = Option<(u64, u64)>;

/// A path's publications, best first.
#[derive(Debug, Default)]
pub(crate) struct Publications {
    ranked: Vec<Publication>,
}

impl Publication {
    /// A publication of `broadcast` at `path` by `route`.
    pub(crate) fn new(
        id: u64,
        path: &str,
        route: Route,
        version: u64,
        broadcast: BroadcastSource,
    ) -> Self {
        Self {
            id,
            tiebreak: tiebreak(path, &route.hops),
            route,
            version,
            broadcast,
        }
    }

    /// Whether this one ranks ahead of `other`.
    fn ahead_of(&self, other: &Publication) -> bool {
        self.rank() < other.rank()
    }

    /// What orders publications. Among broadcasts published here (cost 0, and no hops
    /// or only their publisher's own id: a client that named one), the newest publisher
    /// wins, whatever it claims; hops and the hash order routes through other relays.
    fn rank(&self) -> (u64, usize, u64, std::cmp::Reverse<u64>) {
        let local = self.route.cost == 0 && self.route.hops.len() <= 1;
        let (hops, tiebreak) = match local {
            true => (0, 0),
            false => (self.route.hops.len(), self.tiebreak),
        };
        (self.route.cost, hops, tiebreak, std::cmp::Reverse(self.id))
    }
}

impl Publications {
    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.ranked.is_empty()
    }

    /// Whether `broadcast` is already published here.
    pub(crate) fn holds(&self, broadcast: &BroadcastSource) -> bool {
        self.ranked
            .iter()
            .any(|p| p.broadcast.same_broadcast(broadcast))
    }

    /// Adds `publication` in its place.
    pub(crate) fn insert(&mut self, publication: Publication) {
        let at = self.ranked.partition_point(|p| p.ahead_of(&publication));
        self.ranked.insert(at, publication);
    }

    /// Removes publication `id`, if it is here.
    /// Publication `id`, if it is here.
    pub(crate) fn get(&self, id: u64) -> Option<&Publication> {
        self.ranked.iter().find(|p| p.id == id)
    }

    pub(crate) fn remove(&mut self, id: u64) -> Option<Publication> {
        let index = self.ranked.iter().position(|p| p.id == id)?;
        Some(self.ranked.remove(index))
    }

    /// Gives publication `id` its broadcast's new route, and moves it to its new place;
    /// false if it is not here.
    pub(crate) fn reroute(&mut self, id: u64, path: &str, route: Route, version: u64) -> bool {
        let Some(mut publication) = self.remove(id) else {
            return false;
        };
        if version <= publication.version {
            // An older change delivered late (changes race across threads): keep the newer.
            self.insert(publication);
            return false;
        }
        publication.tiebreak = tiebreak(path, &route.hops);
        publication.route = route;
        publication.version = version;
        self.insert(publication);
        true
    }

    /// The best publication whose route does not pass through `exclude` (any, for 0).
    pub(crate) fn best(&self, exclude: u64) -> Option<&Publication> {
        self.ranked
            .iter()
            .find(|publication| !publication.route.passes_through(exclude))
    }

    /// Every publication whose route does not pass through `exclude`, best first.
    pub(crate) fn not_through(&self, exclude: u64) -> impl Iterator<Item = &Publication> {
        self.ranked
            .iter()
            .filter(move |publication| !publication.route.passes_through(exclude))
    }

    /// [`best`](Self::best)'s identity.
    pub(crate) fn best_id(&self, exclude: u64) -> Best {
        self.best(exclude).map(|p| (p.id, p.version))
    }

    /// How many there are.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ranked.len()
    }
}

/// FNV-1a over the path's bytes and each hop id's little-endian bytes, with FNV's own
/// offset basis: the same on every relay and every build, so that relays agree.
fn tiebreak(path: &str, hops: &[u64]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    let bytes = path
        .as_bytes()
        .iter()
        .copied()
        .chain(hops.iter().flat_map(|hop| hop.to_le_bytes()));
    for byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(PRIME);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BroadcastProducer;

    fn publication(id: u64, hops: &[u64], cost: u64) -> (Publication, BroadcastProducer) {
        let broadcast = BroadcastProducer::new();
        let route = Route {
            hops: hops.to_vec(),
            cost,
        };
        (
            Publication::new(id, "p", route, 0, broadcast.source()),
            broadcast,
        )
    }

    fn order(publications: &Publications) -> Vec<u64> {
        publications.ranked.iter().map(|p| p.id).collect()
    }

    #[test]
    fn routes_rank_by_cost_then_hops_then_hash_then_newest() {
        let mut publications = Publications::default();
        let mut keep = Vec::new();
        for (id, hops, cost) in [
            (0, &[1u64, 2, 3][..], 3),
            (1, &[1, 4][..], 5),
            (2, &[1, 5, 6, 7][..], 2),
            (3, &[][..], 0),
            (4, &[][..], 0),
        ] {
            let (p, b) = publication(id, hops, cost);
            publications.insert(p);
            keep.push(b);
        }
        assert_eq!(
            order(&publications),
            [4, 3, 2, 0, 1],
            "local first (newest of equals), then by cost whatever the hops"
        );
        // Equal cost and length: the hash decides, the same way on every relay.
        let mut tied = Publications::default();
        let (a, _a) = publication(10, &[1, 2], 2);
        let (b, _b) = publication(11, &[1, 3], 2);
        let a_first = tiebreak("p", &[1, 2]) < tiebreak("p", &[1, 3]);
        tied.insert(a);
        tied.insert(b);
        assert_eq!(order(&tied), if a_first { [10, 11] } else { [11, 10] });
    }

    #[test]
    fn the_best_route_for_a_peer_never_passes_through_it() {
        let mut publications = Publications::default();
        let (via_2, _a) = publication(0, &[1, 2], 2);
        let (via_3, _b) = publication(1, &[1, 3, 4], 3);
        publications.insert(via_2);
        publications.insert(via_3);
        assert_eq!(publications.best(0).map(|p| p.id), Some(0));
        assert_eq!(publications.best(2).map(|p| p.id), Some(1), "the standby");
        assert!(publications.best(1).is_none(), "every route comes from 1");
        assert!(publications.reroute(0, "p", Route::through(vec![1, 2, 5, 6]), 1));
        assert_eq!(publications.best(0).map(|p| p.id), Some(1), "re-ranked");
        assert_eq!(publications.best_id(4), Some((0, 1)));
        assert_eq!(publications.len(), 2);
    }

    #[test]
    fn only_a_shared_known_first_hop_makes_two_routes_one_publishers() {
        let route = |hops: &[u64]| Route::through(hops.to_vec());
        assert!(route(&[1, 2]).same_publisher(&route(&[1, 3, 4])));
        assert!(!route(&[1, 2]).same_publisher(&route(&[5, 2])));
        assert!(
            !route(&[]).same_publisher(&route(&[])),
            "unknown matches nothing"
        );
        assert!(!route(&[0, 2]).same_publisher(&route(&[0, 3])));
        assert!(route(&[7, 8]).passes_through(8) && !route(&[7, 8]).passes_through(0));
    }

    #[test]
    fn the_tiebreak_is_fnv1a_of_the_path_and_hops() {
        // FNV-1a of the empty input is its offset basis; of "a", the published value.
        assert_eq!(tiebreak("", &[]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(tiebreak("a", &[]), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(tiebreak("p", &[1, 2]), tiebreak("p", &[2, 1]));
    }
}
