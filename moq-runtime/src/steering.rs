//! Steering in the kernel: which socket of a `SO_REUSEPORT` group gets a datagram.
//!
//! A thread-per-core server binds one socket per worker on one port. By itself the kernel
//! spreads datagrams over them by a hash of the 4-tuple, which knows nothing of QUIC: a
//! client that migrates, or a NAT that rebinds, would land on a worker that does not hold
//! its connection. The program attached here (classic BPF, `SO_ATTACH_REUSEPORT_CBPF`,
//! which needs no privilege) reads the QUIC header instead:
//!
//! - a **short-header** packet carries one of our connection IDs, whose first byte names
//!   the worker that owns the connection ([`crate::cid`]): that byte is the socket's index
//!   in the group;
//! - a **long-header** packet (Initial, 0-RTT, Handshake) goes by its destination
//!   connection ID too: its first byte, modulo the group's size. A client's first
//!   Initials carry an ID the client chose (random: the clients spread over the workers,
//!   and the retransmissions of one follow the first); every packet after it heard our
//!   Initial carries ours, whose first byte names the worker that admitted it. So the
//!   handshake stays on one worker whatever the client's address does. It once went by
//!   the kernel's 4-tuple hash: a NAT that rebound a client mid-handshake sent the rest
//!   of the handshake to another worker, which dropped its Handshake packets and took an
//!   Initial with our connection ID for a new connection, failing to decrypt it (seen in
//!   a 2-hour soak with NAT rebinding, tokio thread per core).
//!
//! A worker index past the group's size (the worker count shrank across a restart) falls
//! back to the hash too; a packet that reaches the wrong worker all the same is counted
//! by that worker's endpoint ([`crate::endpoint::EndpointCounters::misrouted`]) and dropped:
//! QUIC retransmits, and the client's next packets after a migration settle on the hash.
//!
//! The kernel hands the program the UDP payload (it pulls the UDP header first), so offset
//! 0 is the QUIC header's first byte. Sockets join the group in the order they bind, which
//! is the worker order: bind worker 0's socket first.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};

use nix::libc;

use crate::udp::{UdpConfig, UdpSocket};

/// The steering program for a group of `workers` sockets, in classic BPF:
///
/// ```text
/// 0: A = packet[0]                  the QUIC header's first byte
/// 1: if A & 0x80 goto 4             long header
/// 2: A = packet[1]                  short header: the first byte of the DCID, the worker
/// 3: return A                       that worker's socket (out of range: the 4-tuple hash)
/// 4: A = packet[6]                  long header: the first byte of the DCID (after the
///                                   type, the version and the DCID's length)
/// 5: A = A % workers                a worker of the group
/// 6: return A
/// ```
///
/// A datagram too short for a load ends the program, which then returns 0: socket 0.
pub fn program(workers: u32) -> [libc::sock_filter; 7] {
    // The opcodes, from linux/bpf_common.h (libc has the parts as u32).
    let code = |parts: u32| parts as u16;
    let instruction = |parts: u32, jt: u8, k: u32| libc::sock_filter {
        code: code(parts),
        jt,
        jf: 0,
        k,
    };
    let load_byte = libc::BPF_LD | libc::BPF_B | libc::BPF_ABS;
    [
        instruction(load_byte, 0, 0),
        instruction(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K, 2, 0x80),
        instruction(load_byte, 0, 1),
        instruction(libc::BPF_RET | libc::BPF_A, 0, 0),
        instruction(load_byte, 0, 6),
        // The kernel refuses a modulo by zero when the program is attached.
        instruction(libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K, 0, workers),
        instruction(libc::BPF_RET | libc::BPF_A, 0, 0),
    ]
}

/// The sockets of a thread-per-core server: `workers` sockets on `addr`, a reuseport group
/// nobody else is in ([`UdpSocket::bind_group`]), in worker order (the order the program
/// indexes them in), the program attached when there is more than one; and the address
/// they are bound to (with the port the system chose, if `addr`'s was 0).
pub fn bind_workers(
    addr: SocketAddr,
    workers: usize,
    config: &UdpConfig,
) -> io::Result<(Vec<UdpSocket>, SocketAddr)> {
    let sockets = UdpSocket::bind_group(addr, workers, config)?;
    let Some(first) = sockets.first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no workers"));
    };
    let local = first.local_addr()?;
    if workers > 1 {
        attach(first, workers).map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("attaching the steering program: {error}"),
            )
        })?;
    }
    Ok((sockets, local))
}

/// Attaches the steering program to `socket`'s reuseport group of `workers` sockets (to
/// one socket of the group: it applies to the whole group). The socket must have been
/// bound with `reuse_port` (a [`crate::udp::UdpSocket`] with `UdpConfig::reuse_port`, or
/// any UDP socket with `SO_REUSEPORT`).
pub fn attach(socket: &impl AsFd, workers: usize) -> io::Result<()> {
    let workers = u32::try_from(workers)
        .ok()
        .filter(|&workers| workers > 0)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a group of no workers"))?;
    let mut filters = program(workers);
    let program = libc::sock_fprog {
        len: filters.len() as u16,
        filter: filters.as_mut_ptr(),
    };
    // SAFETY: `program` points at `filters`, seven valid instructions that outlive the
    // call (the kernel copies them before returning); the length passed is the size of
    // `sock_fprog`; the descriptor is borrowed from `socket`, open for the call.
    // Exercised by moq-runtime/tests/steering.rs and every thread-per-core test.
    let result = unsafe {
        libc::setsockopt(
            socket.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            std::ptr::from_ref(&program).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
