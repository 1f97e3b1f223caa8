//! UDP sockets for QUIC: GSO sends and GRO receives, each switchable for comparison.
//!
//! The control messages (`UDP_SEGMENT` per send, `UDP_GRO` segment sizes, ECN, packet info)
//! come from [`quinn_udp`], which maintains them per platform; this module adds what an
//! endpoint needs around it: binding with buffer sizes and `SO_REUSEPORT` (through
//! `socket2`), switching GSO and GRO off (to measure them, and for paths that mangle
//! them), and splitting a coalesced receive back into datagrams.
//!
//! On every send the segment size is given explicitly: a batch goes out as one `sendmsg`
//! with its own `UDP_SEGMENT` control message, a single datagram with none, and the
//! socket-wide `UDP_SEGMENT` option is cleared at bind, so nothing depends on a socket
//! default (DESIGN.md, "UDP batching").

pub mod buffers;

use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};

pub use quinn_udp::RecvMeta;
use quinn_udp::{Transmit, UdpSockRef, UdpSocketState};
use socket2::{Domain, Protocol, Socket, Type};

/// The most datagrams one [`UdpSocket::recv`] takes (one `recvmmsg` on Linux): pass this
/// many buffers to receive in batches.
pub const RECV_BATCH: usize = quinn_udp::BATCH_SIZE;

/// How a socket is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UdpConfig {
    /// Send batches with generic segmentation offload (one syscall per batch).
    pub gso: bool,
    /// Receive coalesced batches with generic receive offload.
    pub gro: bool,
    /// `SO_REUSEPORT`, for a socket per worker on one port. Bind such a group with
    /// [`UdpSocket::bind_group`]: a lone [`UdpSocket::bind`] with this set may join a
    /// group someone else holds.
    pub reuse_port: bool,
    /// `SO_SNDBUF` in bytes; `None` keeps the system default.
    pub send_buffer: Option<usize>,
    /// `SO_RCVBUF` in bytes; `None` keeps the system default.
    pub recv_buffer: Option<usize>,
    /// Datagrams (or GRO trains) one receive call takes at most, up to [`RECV_BATCH`]
    /// (`recvmmsg`); 1 turns receive batching off. A driver that receives otherwise
    /// (io_uring's multishot receive) ignores it.
    pub recv_batch: usize,
}

impl Default for UdpConfig {
    /// GSO and GRO on, no reuseport, 4 MiB buffers each way, receives batched.
    fn default() -> Self {
        Self {
            gso: true,
            gro: true,
            reuse_port: false,
            send_buffer: Some(4 << 20),
            recv_buffer: Some(4 << 20),
            recv_batch: RECV_BATCH,
        }
    }
}

/// Linux's segmentation options: no socket-wide segment size (each send says its own),
/// and GRO off where `gro` says so. Elsewhere quinn-udp finds no GSO or GRO and every
/// send and receive is one datagram.
#[cfg(target_os = "linux")]
fn linux_segments(io: &std::net::UdpSocket, gro: bool) -> io::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt};
    setsockopt(io, sockopt::UdpGsoSegment, &0).map_err(io::Error::from)?;
    if !gro {
        setsockopt(io, sockopt::UdpGroSegment, &false).map_err(io::Error::from)?;
    }
    Ok(())
}

/// A non-blocking UDP socket with batched sends and receives.
#[derive(Debug)]
pub struct UdpSocket {
    io: std::net::UdpSocket,
    state: UdpSocketState,
    gso: bool,
    gro: bool,
}

impl UdpSocket {
    /// Binds `addr` (IPv4 or IPv6) with `config`.
    pub fn bind(addr: SocketAddr, config: &UdpConfig) -> io::Result<Self> {
        let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        if config.reuse_port {
            socket.set_reuse_port(true)?;
        }
        if let Some(bytes) = config.send_buffer {
            buffers::set_send_buffer(&socket, bytes)?;
        }
        if let Some(bytes) = config.recv_buffer {
            buffers::set_recv_buffer(&socket, bytes)?;
        }
        socket.bind(&addr.into())?;
        let io: std::net::UdpSocket = socket.into();
        // Turns on GRO (where the kernel has it), packet info and ECN, and non-blocking mode.
        let state = UdpSocketState::new(UdpSockRef::from(&io))?;
        #[cfg(target_os = "linux")]
        linux_segments(&io, config.gro)?;
        Ok(Self {
            io,
            state,
            gso: config.gso,
            gro: config.gro,
        })
    }

    /// Binds `count` sockets to one port as a `SO_REUSEPORT` group of their own, in order
    /// (the order a steering program indexes them in); `config.reuse_port` is implied.
    ///
    /// A plain socket is bound first and released: Linux lets a `SO_REUSEPORT` socket
    /// join any group of the same user on its port, and when asked for port 0 it picks
    /// ports such groups hold as readily as free ones (its search skips sockets that
    /// could share). Without the plain bind, a second server would split the first one's
    /// traffic, silently. With it, a port anyone holds is refused with `AddrInUse`, and
    /// port 0 becomes a port nobody holds. What remains is the instant between the release
    /// and the group's first bind.
    pub fn bind_group(addr: SocketAddr, count: usize, config: &UdpConfig) -> io::Result<Vec<Self>> {
        let reserved = std::net::UdpSocket::bind(addr)?.local_addr()?;
        let config = UdpConfig {
            reuse_port: true,
            ..config.clone()
        };
        (0..count).map(|_| Self::bind(reserved, &config)).collect()
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// How many datagrams one [`send`](Self::send) may carry in a single syscall: 1 without
    /// GSO.
    pub fn max_segments(&self) -> usize {
        if self.gso {
            self.state.max_gso_segments()
        } else {
            1
        }
    }

    /// How many datagrams one receive buffer may hold: 1 without GRO. A receive buffer
    /// should be this many times the largest datagram.
    pub fn gro_segments(&self) -> usize {
        if self.gro {
            self.state.gro_segments()
        } else {
            1
        }
    }

    /// Sends `contents` to `to` as datagrams of `segment_size` bytes (the last may be
    /// shorter): one `sendmsg` with `UDP_SEGMENT` when GSO is on and the batch fits
    /// [`max_segments`](Self::max_segments), one per datagram otherwise. Returns how many
    /// `sendmsg` calls it made. `WouldBlock` means the socket buffer is full: retry when
    /// it is writable.
    pub fn send(&self, to: SocketAddr, contents: &[u8], segment_size: usize) -> io::Result<usize> {
        self.send_from(None, to, contents, segment_size)
    }

    /// [`send`](Self::send) from local address `source` (an `IP_PKTINFO` /
    /// `IPV6_PKTINFO` control message), for a socket bound to a wildcard address; `None`:
    /// the kernel chooses.
    pub fn send_from(
        &self,
        source: Option<IpAddr>,
        to: SocketAddr,
        contents: &[u8],
        segment_size: usize,
    ) -> io::Result<usize> {
        let segment_size = segment_size.max(1);
        let segments = contents.len().div_ceil(segment_size);
        if segments <= 1 || (self.gso && segments <= self.max_segments()) {
            self.state.try_send(
                UdpSockRef::from(&self.io),
                &Transmit {
                    destination: to,
                    ecn: None,
                    contents,
                    segment_size: (segments > 1).then_some(segment_size),
                    src_ip: source,
                },
            )?;
            return Ok(1);
        }
        let mut calls = 0;
        for chunk in contents.chunks(segment_size) {
            calls += self.send_from(source, to, chunk, segment_size)?;
        }
        Ok(calls)
    }

    /// Receives into `buffers`, filling `meta` for each one used; returns how many. With
    /// several buffers (up to [`RECV_BATCH`]) one system call fills as many as there are
    /// datagrams waiting. `WouldBlock` means nothing is waiting.
    pub fn recv(&self, buffers: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> io::Result<usize> {
        self.state.recv(UdpSockRef::from(&self.io), buffers, meta)
    }

    /// The datagrams in one received buffer: several when GRO coalesced them.
    pub fn datagrams<'a>(buffer: &'a [u8], meta: &RecvMeta) -> impl Iterator<Item = &'a [u8]> {
        buffer[..meta.len.min(buffer.len())].chunks(meta.stride.max(1))
    }

    /// The socket, for registering with an event loop.
    pub fn as_std(&self) -> &std::net::UdpSocket {
        &self.io
    }
}

impl std::os::fd::AsFd for UdpSocket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.io.as_fd()
    }
}

impl std::os::fd::AsRawFd for UdpSocket {
    /// For registering with an event loop (tokio's `AsyncFd`, an io_uring ring).
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.io.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;

    /// Everything `receiver` gets until `count` datagrams arrived (or a poll waits 5 s with
    /// nothing, which fails the test by leaving the list short).
    fn receive(receiver: &UdpSocket, count: usize) -> Vec<Vec<u8>> {
        let mut datagrams = Vec::new();
        let mut storage = vec![0u8; 64 * 1024 * receiver.gro_segments().max(1)];
        while datagrams.len() < count {
            let mut fds = [PollFd::new(receiver.as_std().as_fd(), PollFlags::POLLIN)];
            if poll(&mut fds, PollTimeout::from(5000u16)).unwrap_or(0) == 0 {
                break;
            }
            let mut meta = [RecvMeta::default()];
            let mut buffers = [IoSliceMut::new(&mut storage)];
            match receiver.recv(&mut buffers, &mut meta) {
                Ok(n) => {
                    for meta in &meta[..n] {
                        datagrams.extend(UdpSocket::datagrams(&storage, meta).map(<[u8]>::to_vec));
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => panic!("recv: {error}"),
            }
        }
        datagrams
    }

    #[test]
    fn gso_and_gro_on_or_off_deliver_the_same_datagrams() {
        let localhost: SocketAddr = "127.0.0.1:0".parse().unwrap();
        // Ten full datagrams and a short one, each with its index in every byte.
        let mut contents = Vec::new();
        for i in 0..10u8 {
            contents.extend(std::iter::repeat_n(i, 1200));
        }
        contents.extend(std::iter::repeat_n(10u8, 500));
        let expected: Vec<Vec<u8>> = contents.chunks(1200).map(<[u8]>::to_vec).collect();

        for gso in [true, false] {
            for gro in [true, false] {
                let config = UdpConfig {
                    gso,
                    gro,
                    ..UdpConfig::default()
                };
                let receiver = UdpSocket::bind(localhost, &config).unwrap();
                let sender = UdpSocket::bind(localhost, &config).unwrap();
                if gso {
                    // Linux has had UDP GSO since 4.18: the batch really is one sendmsg.
                    assert!(sender.max_segments() >= 11, "GSO available");
                } else {
                    assert_eq!(sender.max_segments(), 1);
                }
                if !gro {
                    assert_eq!(receiver.gro_segments(), 1);
                }
                sender
                    .send(receiver.local_addr().unwrap(), &contents, 1200)
                    .unwrap();
                assert_eq!(
                    receive(&receiver, expected.len()),
                    expected,
                    "gso {gso}, gro {gro}"
                );
            }
        }
    }

    #[test]
    fn reuse_port_lets_two_sockets_share_a_port() {
        let config = UdpConfig {
            reuse_port: true,
            ..UdpConfig::default()
        };
        let first = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &config).unwrap();
        let port = first.local_addr().unwrap();
        let second = UdpSocket::bind(port, &config).unwrap();
        assert_eq!(second.local_addr().unwrap(), port);
        let plain = UdpSocket::bind(port, &UdpConfig::default());
        assert!(plain.is_err(), "without reuseport the port is taken");
    }

    #[test]
    fn groups_bound_on_port_zero_never_share_a_port() {
        // Linux hands a lone reuseport bind on port 0 a port some other group holds:
        // here about 1 in 60 of 1,000 binds, so 500 without the plain bind first would
        // share a port about 4 times.
        let localhost: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let config = UdpConfig {
            send_buffer: None,
            recv_buffer: None,
            ..UdpConfig::default()
        };
        let groups: Vec<Vec<UdpSocket>> = (0..500)
            .map(|_| UdpSocket::bind_group(localhost, 1, &config).unwrap())
            .collect();
        let mut ports = std::collections::HashSet::new();
        for group in &groups {
            let port = group[0].local_addr().unwrap();
            assert!(ports.insert(port), "{port} is held by two groups");
        }
    }

    #[test]
    fn a_group_is_refused_a_port_another_group_holds() {
        let held = UdpSocket::bind_group("127.0.0.1:0".parse().unwrap(), 2, &UdpConfig::default())
            .unwrap();
        let port = held[0].local_addr().unwrap();
        assert_eq!(held[1].local_addr().unwrap(), port);
        let error = UdpSocket::bind_group(port, 2, &UdpConfig::default()).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
    }
}
