//! The socket buffer sizes a UDP server asks for, and what the kernel grants.
//!
//! A QUIC server receiving bursts from thousands of clients needs a receive buffer far
//! above Linux's default cap (`net.core.rmem_max`, 208 KiB on a stock kernel): past it,
//! datagrams are dropped before the process sees them and every connection retransmits.
//! Linux clamps a `SO_RCVBUF` request to the cap without an error, so the size is read
//! back. Short of what was asked, the `*BUFFORCE` options (which pass the cap with
//! `CAP_NET_ADMIN`) are tried; if still short, a warning names the sysctl that fixes it,
//! once per process.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use socket2::Socket;

/// What one direction's buffer was asked for and given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Granted {
    /// Bytes asked for.
    pub requested: usize,
    /// Bytes the kernel holds for data (half of what `getsockopt` reports on Linux, which
    /// counts its bookkeeping too).
    pub granted: usize,
}

impl Granted {
    /// Whether the kernel gave less than was asked.
    pub fn is_short(&self) -> bool {
        self.granted < self.requested
    }
}

/// Which buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Receive,
    Send,
}

/// Warned once per process, whatever the number of sockets.
static WARNED: AtomicBool = AtomicBool::new(false);

/// Sets the receive buffer to `bytes`, passing the kernel's cap where the process may.
pub fn set_recv_buffer(socket: &Socket, bytes: usize) -> io::Result<Granted> {
    set(socket, bytes, Direction::Receive)
}

/// Sets the send buffer to `bytes`, passing the kernel's cap where the process may.
pub fn set_send_buffer(socket: &Socket, bytes: usize) -> io::Result<Granted> {
    set(socket, bytes, Direction::Send)
}

fn set(socket: &Socket, bytes: usize, direction: Direction) -> io::Result<Granted> {
    let read = |socket: &Socket| -> io::Result<usize> {
        let reported = match direction {
            Direction::Receive => socket.recv_buffer_size()?,
            Direction::Send => socket.send_buffer_size()?,
        };
        // Linux reports twice what it holds for data (its bookkeeping counts too).
        Ok(if cfg!(target_os = "linux") {
            reported / 2
        } else {
            reported
        })
    };
    match direction {
        Direction::Receive => socket.set_recv_buffer_size(bytes)?,
        Direction::Send => socket.set_send_buffer_size(bytes)?,
    }
    let mut granted = Granted {
        requested: bytes,
        granted: read(socket)?,
    };
    #[cfg(target_os = "linux")]
    if granted.is_short() && force(socket, bytes, direction).is_ok() {
        granted.granted = read(socket)?;
    }
    if granted.is_short() && !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            requested = granted.requested,
            granted = granted.granted,
            "{}",
            advice(direction, granted)
        );
    }
    Ok(granted)
}

/// Asks for `bytes` past the kernel's cap (`SO_RCVBUFFORCE`, `SO_SNDBUFFORCE`): refused
/// without CAP_NET_ADMIN, and the clamped size stays then.
#[cfg(target_os = "linux")]
fn force(socket: &Socket, bytes: usize, direction: Direction) -> nix::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt};
    match direction {
        Direction::Receive => setsockopt(socket, sockopt::RcvBufForce, &bytes),
        Direction::Send => setsockopt(socket, sockopt::SndBufForce, &bytes),
    }
}

/// What the warning says: the figures, and the sysctl (or capability) that fixes it.
fn advice(direction: Direction, granted: Granted) -> String {
    let (name, sysctl) = match direction {
        Direction::Receive => ("receive", "net.core.rmem_max"),
        Direction::Send => ("send", "net.core.wmem_max"),
    };
    format!(
        "the kernel gave the UDP socket a {name} buffer of {} KiB, not the {} KiB asked for: \
         datagrams will be dropped under load. Raise the cap (`sysctl -w {sysctl}={}`, and \
         the other direction's too; persist it in /etc/sysctl.d/) or grant the process \
         CAP_NET_ADMIN",
        granted.granted / 1024,
        granted.requested / 1024,
        granted.requested,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Protocol, Type};

    fn socket() -> Socket {
        Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap()
    }

    #[test]
    fn a_size_within_the_cap_is_granted_and_read_back() {
        let granted = set_recv_buffer(&socket(), 64 << 10).unwrap();
        assert_eq!(
            granted,
            Granted {
                requested: 64 << 10,
                granted: 64 << 10
            }
        );
        assert!(!granted.is_short());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_size_past_the_cap_is_forced_or_reported_short() {
        let cap: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let asked = cap.saturating_mul(4).min(1 << 30);
        let granted = set_recv_buffer(&socket(), asked).unwrap();
        // With CAP_NET_ADMIN (root) the force passes the cap; without it the kernel's cap
        // is what the socket has, and the grant says so.
        assert!(
            granted.granted == asked || granted.granted == cap,
            "{granted:?}, cap {cap}"
        );
        assert_eq!(granted.is_short(), granted.granted < asked);
        let text = advice(
            Direction::Receive,
            Granted {
                requested: 4 << 20,
                granted: 208 << 10,
            },
        );
        assert!(
            text.contains("sysctl -w net.core.rmem_max=4194304"),
            "{text}"
        );
        assert!(text.contains("208 KiB"), "{text}");
    }
}
