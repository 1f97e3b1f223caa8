//! Server connection IDs that name the worker owning the connection, and steering packets
//! to that worker.
//!
//! A multi-worker endpoint (a UDP socket per core with `SO_REUSEPORT`, or one socket read
//! by several workers) must hand every packet of a connection to the worker that holds the
//! connection's state. The kernel's reuseport hash knows nothing of QUIC, but the connection
//! ID does, because the server chooses every CID the client sends to: ours are
//! `[worker index][entropy]`, [`CID_LEN`] bytes. The worker that receives a connection's
//! first Initial owns it for life; Initial and 0-RTT packets still carry the DCID the client
//! chose, so [`steer`] sends those by a consistent hash of it, which every worker computes
//! the same way.
//!
//! The header parsing here is written out rather than taken from quiche: steering runs on
//! every datagram before any connection is looked up (and the same logic goes into a
//! reuseport steering program later), so it must not allocate and must not need the
//! connection's state; it reads only the first byte and the DCID.

use std::fmt;
use std::hash::Hasher;

/// The length of every server connection ID. Fixed, because a short-header packet does not
/// carry its DCID's length.
pub const CID_LEN: usize = 16;

/// A connection ID this endpoint chose.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectionId([u8; CID_LEN]);

/// Makes connection IDs for one worker.
#[derive(Debug, Clone, Copy)]
pub struct CidGenerator {
    worker: u8,
}

/// Where a datagram should go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steer {
    /// To this worker.
    Worker(usize),
    /// Not a QUIC packet this endpoint can route (too short, or an empty datagram).
    Drop,
}

/// Why a connection ID could not be made.
#[derive(Debug, thiserror::Error)]
#[error("the system's random source failed: {0}")]
pub struct CidError(getrandom::Error);

impl ConnectionId {
    /// The ID's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The worker that owns the connection.
    pub fn worker(&self) -> u8 {
        self.0[0]
    }

    /// The ID in `bytes`, if they have our length.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(Self)
    }
}

impl fmt::Debug for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl CidGenerator {
    /// A generator for `worker`'s connections.
    pub fn new(worker: u8) -> Self {
        Self { worker }
    }

    /// A fresh connection ID: this worker's index, then entropy from the system's secure
    /// random source (CIDs must not be guessable, or an off-path attacker could aim packets
    /// at a connection).
    pub fn generate(&self) -> Result<ConnectionId, CidError> {
        let mut bytes = [0u8; CID_LEN];
        getrandom::fill(&mut bytes[1..]).map_err(CidError)?;
        bytes[0] = self.worker;
        Ok(ConnectionId(bytes))
    }
}

/// Which of `workers` workers a datagram belongs to.
///
/// Short-header and Handshake packets carry one of our CIDs: its first byte names the
/// worker. Initial and 0-RTT packets carry the client's own DCID: they go by a consistent
/// hash of it, keyed by `key` (the same on every worker), so that every packet of a new
/// connection reaches the same worker until the client switches to our CID. Anything else
/// that parses goes by the hash too (a stateless reset or version negotiation is then at
/// least handled consistently).
pub fn steer(datagram: &[u8], workers: usize, key: u64) -> Steer {
    let workers = workers.max(1);
    let Some(&first) = datagram.first() else {
        return Steer::Drop;
    };
    if first & 0x80 == 0 {
        // Short header: flags, then our DCID.
        return match datagram.get(1..1 + CID_LEN) {
            Some(dcid) => by_owner(dcid, workers, key),
            None => Steer::Drop,
        };
    }
    // Long header: flags, version (4), DCID length (1), DCID.
    let Some(&dcid_len) = datagram.get(5) else {
        return Steer::Drop;
    };
    let Some(dcid) = datagram.get(6..6 + usize::from(dcid_len)) else {
        return Steer::Drop;
    };
    let version = u32::from_be_bytes([datagram[1], datagram[2], datagram[3], datagram[4]]);
    // QUIC v1 long packet types: 0 Initial, 1 0-RTT, 2 Handshake, 3 Retry.
    let packet_type = (first >> 4) & 0x3;
    let client_chosen = version == 0 || packet_type == 0 || packet_type == 1;
    if client_chosen {
        Steer::Worker(by_hash(dcid, workers, key))
    } else {
        by_owner(dcid, workers, key)
    }
}

/// A CID of ours names its worker; a worker index out of range (a CID from before a
/// restart with more workers) falls back to the hash.
fn by_owner(dcid: &[u8], workers: usize, key: u64) -> Steer {
    match ConnectionId::from_bytes(dcid) {
        Some(cid) if usize::from(cid.worker()) < workers => {
            Steer::Worker(usize::from(cid.worker()))
        }
        _ => Steer::Worker(by_hash(dcid, workers, key)),
    }
}

/// Jump consistent hash (Lamping and Veach, 2014) of a keyed hash of the DCID: adding a
/// worker moves only 1/n of the new connections' Initials. The keyed hash is std's
/// SipHash, the same in every worker of one binary; a steering program in the kernel will
/// need this function spelled out, and then both sides will use that.
fn by_hash(dcid: &[u8], workers: usize, key: u64) -> usize {
    let mut hasher = std::hash::DefaultHasher::new();
    hasher.write_u64(key);
    hasher.write(dcid);
    let mut hash = hasher.finish();
    let mut bucket: i64 = -1;
    let mut next: i64 = 0;
    while next < workers as i64 {
        bucket = next;
        hash = hash.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        next = ((bucket + 1) as f64 * ((1u64 << 31) as f64 / ((hash >> 33) + 1) as f64)) as i64;
    }
    bucket.max(0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A long-header packet of `packet_type` with `dcid`.
    fn long_header(packet_type: u8, dcid: &[u8]) -> Vec<u8> {
        let mut packet = vec![0xc0 | (packet_type << 4), 0, 0, 0, 1, dcid.len() as u8];
        packet.extend_from_slice(dcid);
        packet.extend_from_slice(&[0; 20]);
        packet
    }

    fn short_header(dcid: &[u8]) -> Vec<u8> {
        let mut packet = vec![0x40];
        packet.extend_from_slice(dcid);
        packet.extend_from_slice(&[0; 20]);
        packet
    }

    #[test]
    fn a_generated_id_names_its_worker_and_differs_every_time() {
        let generator = CidGenerator::new(5);
        let a = generator.generate().unwrap();
        let b = generator.generate().unwrap();
        assert_eq!((a.worker(), b.worker()), (5, 5));
        assert_ne!(a, b, "15 bytes of entropy");
        assert_eq!(ConnectionId::from_bytes(a.as_bytes()), Some(a));
        assert_eq!(ConnectionId::from_bytes(&[0; 8]), None);
    }

    #[test]
    fn packets_with_our_cid_go_to_its_worker() {
        let cid = CidGenerator::new(3).generate().unwrap();
        assert_eq!(steer(&short_header(cid.as_bytes()), 4, 7), Steer::Worker(3));
        assert_eq!(
            steer(&long_header(2, cid.as_bytes()), 4, 7),
            Steer::Worker(3),
            "Handshake"
        );
    }

    #[test]
    fn initials_go_by_the_hash_of_the_client_dcid_the_same_way_every_time() {
        let dcid = [0xab; 8];
        let first = steer(&long_header(0, &dcid), 4, 7);
        assert_eq!(steer(&long_header(0, &dcid), 4, 7), first);
        assert_eq!(
            steer(&long_header(1, &dcid), 4, 7),
            first,
            "0-RTT follows the Initial"
        );
        // Even a client DCID whose first byte looks like a worker index goes by the hash.
        let lookalike = [1u8; CID_LEN];
        let Steer::Worker(worker) = steer(&long_header(0, &lookalike), 4, 7) else {
            panic!("routed");
        };
        assert_eq!(
            steer(&long_header(0, &lookalike), 4, 7),
            Steer::Worker(worker)
        );
    }

    #[test]
    fn truncated_and_empty_datagrams_are_dropped() {
        assert_eq!(steer(&[], 4, 0), Steer::Drop);
        assert_eq!(steer(&[0x40, 1, 2], 4, 0), Steer::Drop);
        assert_eq!(steer(&[0xc0, 0, 0, 0, 1, 20, 1, 2], 4, 0), Steer::Drop);
    }

    #[test]
    fn the_hash_spreads_initials_evenly_and_moves_few_when_a_worker_is_added() {
        let dcids: Vec<[u8; 8]> = (0u64..8000).map(|i| i.to_le_bytes()).collect();
        let mut counts = [0usize; 4];
        let mut moved = 0;
        for dcid in &dcids {
            let four = by_hash(dcid, 4, 9);
            counts[four] += 1;
            if by_hash(dcid, 5, 9) != four {
                moved += 1;
            }
        }
        assert!(
            counts.iter().all(|&c| (1700..2300).contains(&c)),
            "{counts:?}"
        );
        assert!((1200..2000).contains(&moved), "about 1/5 moves: {moved}");
    }

    proptest! {
        /// No datagram panics the steering, and every answer is a worker in range.
        #[test]
        fn any_datagram_steers_in_range(datagram in proptest::collection::vec(any::<u8>(), 0..64), workers in 1usize..64) {
            if let Steer::Worker(worker) = steer(&datagram, workers, 1) {
                prop_assert!(worker < workers);
            }
        }
    }
}
