//! The steering program in the real kernel: a `SO_REUSEPORT` group of 2 and of 4 sockets
//! on loopback, datagrams shaped like QUIC packets, and which socket each lands on.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use moqx_runtime::cid::CidGenerator;
use moqx_runtime::udp::{UdpConfig, UdpSocket as GroupSocket};

/// A group of `workers` sockets on one loopback port, the program attached.
fn group(workers: usize) -> (Vec<GroupSocket>, SocketAddr) {
    let sockets = GroupSocket::bind_group(
        "127.0.0.1:0".parse().unwrap(),
        workers,
        &UdpConfig::default(),
    )
    .unwrap();
    let address = sockets[0].local_addr().unwrap();
    moqx_runtime::steering::attach(&sockets[0], workers).unwrap();
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

/// A long-header (Initial) packet with a client-chosen connection ID of `seed` bytes.
fn long_header(seed: u8) -> Vec<u8> {
    let mut packet = vec![0xc0, 0, 0, 0, 1, 8];
    packet.extend_from_slice(&[seed; 8]);
    packet.extend_from_slice(&[0; 40]);
    packet
}

/// A long-header (Handshake) packet to a connection ID of `worker`'s.
fn long_header_to(worker: u8) -> Vec<u8> {
    let cid = CidGenerator::new(worker).generate().unwrap();
    let mut packet = vec![0xe0, 0, 0, 0, 1, cid.as_bytes().len() as u8];
    packet.extend_from_slice(cid.as_bytes());
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

/// A client's Initials go by the connection ID it chose, from whatever address: a NAT
/// that rebinds it mid-handshake does not move its handshake to another worker.
#[test]
fn a_clients_initials_reach_one_worker_from_every_address() {
    for workers in [2usize, 4] {
        let (sockets, address) = group(workers);
        let mut used = vec![false; workers];
        for chosen in 0..16u8 {
            let first = landing(&sockets, &client(), address, &long_header(chosen));
            for _ in 0..5 {
                // Rebound: another source port.
                let again = landing(&sockets, &client(), address, &long_header(chosen));
                assert_eq!(again, first, "{workers} workers, ID {chosen}");
            }
            used[first] = true;
        }
        // The clients spread over the workers.
        assert!(used.iter().all(|&u| u), "{used:?}");
    }
}

/// Regression: long-header packets went by the kernel's 4-tuple hash, so once a client
/// used our connection ID (its Handshake packets, its Initials after ours), a NAT that
/// rebound it sent them to whichever worker the new 4-tuple hashed to: that worker
/// dropped the Handshake packets and took an Initial for a new connection (which failed
/// to decrypt it), and the client's handshake stalled (the 2-hour soak on tokio thread
/// per core, a churner connecting as the NAT rebound).
#[test]
fn long_header_packets_to_our_connection_id_reach_its_worker_from_every_address() {
    for workers in [2usize, 4] {
        let (sockets, address) = group(workers);
        for _ in 0..20 {
            let client = client();
            for worker in 0..workers {
                let reached = landing(&sockets, &client, address, &long_header_to(worker as u8));
                assert_eq!(reached, worker, "{workers} workers");
            }
        }
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
