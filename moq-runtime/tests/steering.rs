//! The steering program in the real kernel: a `SO_REUSEPORT` group of 2 and of 4 sockets
//! on loopback, datagrams shaped like QUIC packets, and which socket each lands on.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use moq_runtime::cid::CidGenerator;
use moq_runtime::udp::{UdpConfig, UdpSocket as GroupSocket};

/// A group of `workers` sockets on one loopback port, the program attached.
fn group(workers: usize) -> (Vec<GroupSocket>, SocketAddr) {
    let sockets = GroupSocket::bind_group(
        "127.0.0.1:0".parse().unwrap(),
        workers,
        &UdpConfig::default(),
    )
    .unwrap();
    let address = sockets[0].local_addr().unwrap();
    moq_runtime::steering::attach(&sockets[0]).unwrap();
    (sockets, address)
}

/// Sends `datagram` from `client` and returns the index of the socket it reached.
fn landing(sockets: &[GroupSocket], client: &UdpSocket, to: SocketAddr, datagram: &[u8]) -> usize {
    client.send_to(datagram, to).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 2048];
    while Instant::now() < deadline {
        for (index, socket) in sockets.iter().enumerate() {
            // The sockets are non-blocking.
            if let Ok((len, _)) = socket.as_std().recv_from(&mut buf) {
                assert_eq!(&buf[..len], datagram);
                return index;
            }
        }
        std::thread::yield_now();
    }
    panic!("the datagram reached no socket");
}

/// A short-header packet to a connection ID of `worker`'s.
fn short_header(worker: u8) -> Vec<u8> {
    let cid = CidGenerator::new(worker).generate().unwrap();
    let mut packet = vec![0x40];
    packet.extend_from_slice(cid.as_bytes());
    packet.extend_from_slice(&[0xaa; 32]);
    packet
}

/// A long-header (Initial) packet with a client-chosen connection ID.
fn long_header(seed: u8) -> Vec<u8> {
    let mut packet = vec![0xc0, 0, 0, 0, 1, 8];
    packet.extend_from_slice(&[seed; 8]);
    packet.extend_from_slice(&[0; 40]);
    packet
}

fn client() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0").unwrap()
}

#[test]
fn a_short_header_packet_reaches_the_worker_its_connection_id_names() {
    for workers in [2usize, 4] {
        let (sockets, address) = group(workers);
        // From many source ports (many 4-tuples): the CID decides, not the hash.
        for _ in 0..20 {
            let client = client();
            for worker in 0..workers {
                let reached = landing(&sockets, &client, address, &short_header(worker as u8));
                assert_eq!(reached, worker, "{workers} workers");
            }
        }
    }
}

#[test]
fn long_header_packets_of_one_client_all_reach_one_worker() {
    for workers in [2usize, 4] {
        let (sockets, address) = group(workers);
        let mut used = vec![false; workers];
        for port in 0..64u8 {
            let client = client();
            // A client's Initials (and the rest of its handshake) go by the 4-tuple:
            // wherever the first went, the retransmissions follow.
            let first = landing(&sockets, &client, address, &long_header(port));
            for retransmission in 0..5 {
                let again = landing(&sockets, &client, address, &long_header(retransmission));
                assert_eq!(again, first, "{workers} workers");
            }
            used[first] = true;
        }
        // The fallback is the kernel's hash, not one fixed socket.
        assert!(used.iter().filter(|&&u| u).count() > 1, "{used:?}");
    }
}

#[test]
fn a_worker_index_past_the_group_falls_back_to_the_hash() {
    let (sockets, address) = group(2);
    let client = client();
    // Worker 7 of a group of 2 (a connection from before a restart with fewer workers):
    // consistently one socket per client.
    let first = landing(&sockets, &client, address, &short_header(7));
    for _ in 0..5 {
        assert_eq!(landing(&sockets, &client, address, &short_header(7)), first);
    }
}
