//! Batching datagrams out: consecutive packets to one destination, of one size (the last
//! may be shorter), become one GSO send.

use foldhash::HashMap;
use std::net::{IpAddr, SocketAddr};

use super::MAX_DATAGRAM;
use super::spare::SpareBuffers;

/// The most datagrams one [`Transmit`] carries (the kernel's GSO limit is 64 segments).
pub const MAX_SEGMENTS: usize = 64;

/// The most bytes one [`Transmit`] carries: Linux refuses a GSO send whose payload is over
/// what one IPv4 datagram could hold (65,535 − 20 B IP − 8 B UDP), with `EMSGSIZE`, and
/// the whole batch is lost. With full-size packets a batch holds 48 datagrams, not 64.
pub const MAX_GSO_BYTES: usize = 65_507;

// A batch of any shape the endpoint builds is one the kernel accepts.
const _: () = assert!(MAX_GSO_BYTES / MAX_DATAGRAM <= MAX_SEGMENTS);
const _: () = assert!(MAX_DATAGRAM <= MAX_GSO_BYTES);

/// One batch of datagrams to one destination: `contents` split every `segment_size` bytes
/// (the last datagram may be shorter). Send it with one GSO `sendmsg`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Where the datagrams go.
    pub destination: SocketAddr,
    /// The local address they leave from, on a socket bound to a wildcard address: the
    /// address the peer's packets arrived at (`IP_PKTINFO` / `IPV6_PKTINFO` both ways), so
    /// that a client that reached a secondary address or a VIP hears back from it (RFC
    /// 9000 §9: it discards anything else). `None`: the kernel's choice (a socket bound
    /// to one address, or a connection we dialed).
    pub source: Option<IpAddr>,
    /// The datagrams, back to back.
    pub contents: Vec<u8>,
    /// The size of every datagram but the last.
    pub segment_size: usize,
}

/// Appends `packet` to the open GSO batch for `path` (the destination, and the source
/// address when one is chosen) if it fits there (every datagram
/// so far full-sized, this one no larger, fewer than [`MAX_SEGMENTS`], at most
/// [`MAX_GSO_BYTES`] in all), or starts a batch
/// in a buffer from `spare`. Packets to one destination stay in the order they were
/// produced. A path MTU probe (`alone`) goes in a batch of its own that nothing joins: a
/// path too small for it refuses its whole batch.
pub(super) fn push_packet(
    open_batches: &mut HashMap<(SocketAddr, Option<IpAddr>), usize>,
    transmits: &mut Vec<Transmit>,
    spare: &mut SpareBuffers,
    path: (SocketAddr, Option<IpAddr>),
    packet: &[u8],
    alone: bool,
) {
    if alone {
        // Closed at once: the next packet to this path starts a batch of its own.
        open_batches.remove(&path);
        transmits.push(start_batch(spare, path, packet));
        return;
    }
    if let Some(transmit) = open_batches
        .get(&path)
        .and_then(|&index| transmits.get_mut(index))
    {
        let size = transmit.segment_size;
        let all_full = transmit.contents.len() % size == 0;
        let segments = transmit.contents.len() / size;
        let fits = transmit.contents.len() + packet.len() <= MAX_GSO_BYTES;
        if all_full && packet.len() <= size && segments < MAX_SEGMENTS && fits {
            transmit.contents.extend_from_slice(packet);
            return;
        }
    }
    open_batches.insert(path, transmits.len());
    transmits.push(start_batch(spare, path, packet));
}

/// A batch to `path` holding `packet`, in a buffer from `spare`.
fn start_batch(
    spare: &mut SpareBuffers,
    (destination, source): (SocketAddr, Option<IpAddr>),
    packet: &[u8],
) -> Transmit {
    let mut contents = spare.take();
    contents.extend_from_slice(packet);
    Transmit {
        destination,
        source,
        contents,
        segment_size: packet.len().max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::MAX_DATAGRAM;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn packets_to_one_destination_form_gso_batches_of_one_size() {
        let packets = vec![
            (addr(1), vec![1; 100]),
            (addr(2), vec![2; 100]),
            (addr(1), vec![1; 100]),
            (addr(1), vec![1; 40]), // shorter: ends the batch
            (addr(1), vec![1; 100]),
        ];
        let mut transmits = Vec::new();
        let mut open = HashMap::default();
        for (destination, packet) in &packets {
            push_packet(
                &mut open,
                &mut transmits,
                &mut SpareBuffers::default(),
                (*destination, None),
                packet,
                false,
            );
        }
        let shape: Vec<(u16, usize, usize)> = transmits
            .iter()
            .map(|t| (t.destination.port(), t.contents.len(), t.segment_size))
            .collect();
        assert_eq!(shape, [(1, 240, 100), (2, 100, 100), (1, 100, 100)]);
    }

    /// A path MTU probe goes alone: had a smaller packet joined its batch as the last
    /// segment, a path too small for the probe would have refused both.
    #[test]
    fn a_path_mtu_probe_travels_in_a_batch_of_its_own() {
        let mut transmits = Vec::new();
        let mut open = HashMap::default();
        let mut spare = SpareBuffers::default();
        for (packet, probe) in [(1200, false), (1452, true), (1200, false), (1200, false)] {
            push_packet(
                &mut open,
                &mut transmits,
                &mut spare,
                (addr(1), None),
                &vec![7; packet],
                probe,
            );
        }
        let shape: Vec<(usize, usize)> = transmits
            .iter()
            .map(|t| (t.contents.len(), t.segment_size))
            .collect();
        assert_eq!(shape, [(1200, 1200), (1452, 1452), (2400, 1200)]);
    }

    #[test]
    fn a_batch_holds_at_most_the_gso_segment_limit() {
        let mut transmits = Vec::new();
        let mut open = HashMap::default();
        for _ in 0..MAX_SEGMENTS + 1 {
            push_packet(
                &mut open,
                &mut transmits,
                &mut SpareBuffers::default(),
                (addr(1), None),
                &[7; 50],
                false,
            );
        }
        let segments: Vec<usize> = transmits.iter().map(|t| t.contents.len() / 50).collect();
        assert_eq!(segments, [MAX_SEGMENTS, 1]);
    }

    /// Review finding F4: full-size packets made batches of 64 × 1,350 B = 86,400 B, which
    /// Linux refused whole (`EMSGSIZE` from 49 segments of that size up).
    #[test]
    fn a_batch_of_full_size_packets_stays_within_the_kernels_gso_payload() {
        let mut transmits = Vec::new();
        let mut open = HashMap::default();
        for _ in 0..100 {
            push_packet(
                &mut open,
                &mut transmits,
                &mut SpareBuffers::default(),
                (addr(1), None),
                &[7; MAX_DATAGRAM],
                false,
            );
        }
        let segments: Vec<usize> = transmits
            .iter()
            .map(|t| t.contents.len() / MAX_DATAGRAM)
            .collect();
        let per_batch = MAX_GSO_BYTES / MAX_DATAGRAM; // 45 of 1,452 B
        assert_eq!(segments, [per_batch, per_batch, 100 - 2 * per_batch]);
        assert!(transmits.iter().all(|t| t.contents.len() <= MAX_GSO_BYTES));
    }

    /// The batches the endpoint builds are accepted by this kernel: one GSO send of the
    /// largest batch on a real socket succeeds (and one byte more is refused, so the test
    /// would see a wrong limit).
    #[test]
    fn the_kernel_accepts_the_largest_batch() {
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let socket = crate::udp::UdpSocket::bind(
            "127.0.0.1:0".parse().expect("address"),
            &crate::udp::UdpConfig::default(),
        )
        .expect("bind");
        let destination = receiver.local_addr().expect("address");
        let batch = vec![0u8; (MAX_GSO_BYTES / MAX_DATAGRAM) * MAX_DATAGRAM];
        socket
            .send(destination, &batch, MAX_DATAGRAM)
            .expect("the kernel accepts the largest batch");
        let over = vec![0u8; 49 * MAX_DATAGRAM];
        assert!(socket.send(destination, &over, MAX_DATAGRAM).is_err());
    }
}
