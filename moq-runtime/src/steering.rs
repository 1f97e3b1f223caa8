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
//! - a **long-header** packet (Initial, 0-RTT, Handshake, Retry's answer) gets an index out
//!   of range, so the kernel falls back to its 4-tuple hash: a client's Initials, and the
//!   rest of its handshake, all land on the worker that saw the first, which then owns
//!   the connection.
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

/// The steering program, in classic BPF:
///
/// ```text
/// 0: A = packet[0]                  the QUIC header's first byte
/// 1: if A & 0x80 goto 4             long header
/// 2: A = packet[1]                  the first byte of the DCID: the worker
/// 3: return A                       that worker's socket
/// 4: return 0xffffffff              out of range: the kernel's 4-tuple hash
/// ```
pub fn program() -> [libc::sock_filter; 5] {
    // The opcodes, from linux/bpf_common.h (libc has the parts as u32).
    let code = |parts: u32| parts as u16;
    let load_byte = code(libc::BPF_LD | libc::BPF_B | libc::BPF_ABS);
    [
        libc::sock_filter {
            code: load_byte,
            jt: 0,
            jf: 0,
            k: 0,
        },
        libc::sock_filter {
            code: code(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K),
            jt: 2,
            jf: 0,
            k: 0x80,
        },
        libc::sock_filter {
            code: load_byte,
            jt: 0,
            jf: 0,
            k: 1,
        },
        libc::sock_filter {
            code: code(libc::BPF_RET | libc::BPF_A),
            jt: 0,
            jf: 0,
            k: 0,
        },
        libc::sock_filter {
            code: code(libc::BPF_RET | libc::BPF_K),
            jt: 0,
            jf: 0,
            k: u32::MAX,
        },
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
        attach(first).map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("attaching the steering program: {error}"),
            )
        })?;
    }
    Ok((sockets, local))
}

/// Attaches the steering program to `socket`'s reuseport group (to one socket of the
/// group: it applies to the whole group). The socket must have been bound with
/// `reuse_port` (a [`crate::udp::UdpSocket`] with `UdpConfig::reuse_port`, or any UDP
/// socket with `SO_REUSEPORT`).
pub fn attach(socket: &impl AsFd) -> io::Result<()> {
    let mut filters = program();
    let program = libc::sock_fprog {
        len: filters.len() as u16,
        filter: filters.as_mut_ptr(),
    };
    // SAFETY: `program` points at `filters`, five valid instructions that outlive the
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
