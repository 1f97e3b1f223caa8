//! The bytes a ring's `recvmsg` leaves beside each datagram (its source address and control
//! messages), and the control messages a send carries (`UDP_SEGMENT`, and the source
//! address as packet info).
//!
//! Written by hand: `quinn-udp` and `nix` parse control messages only for receives they
//! make themselves; a multishot `recvmsg` on a ring leaves them in a provided buffer, as
//! plain bytes laid out as `cmsghdr`s. The parser here reads them from a byte slice (no
//! pointer casts) and ignores what it does not know.

use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Bytes of a `cmsghdr` (its length, level and type), aligned.
const HEADER: usize = align(size_of::<libc::cmsghdr>());

/// Control-message space a receive needs: the GRO segment size, the ECN bits and the
/// destination address (IPv6's packet info is the largest), with room to spare.
pub(crate) const RECV_CONTROL: usize = 128;

/// Bytes of the largest source address a receive names (`sockaddr_in6`).
pub(crate) const RECV_NAME: usize = size_of::<libc::sockaddr_in6>();

/// What the control messages of one receive said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RecvControl {
    /// With GRO, the size of every datagram in the buffer but the last.
    pub(crate) segment_size: Option<usize>,
    /// The ECN codepoint (the low two bits of the TOS or traffic class byte).
    pub(crate) ecn: Option<u8>,
    /// The address the datagrams were sent to.
    pub(crate) destination: Option<IpAddr>,
}

/// Reads the control messages of one receive.
pub(crate) fn parse(mut control: &[u8]) -> RecvControl {
    let mut parsed = RecvControl::default();
    while control.len() >= HEADER {
        let Some(len) = read_usize(control, 0) else {
            break;
        };
        let (level, kind) = (
            read_i32(control, size_of::<usize>()),
            read_i32(control, size_of::<usize>() + 4),
        );
        if len < HEADER || len > control.len() {
            break; // malformed or truncated: nothing after it can be trusted
        }
        let data = &control[HEADER..len];
        match (level, kind) {
            (Some(libc::SOL_UDP), Some(libc::UDP_GRO)) => {
                parsed.segment_size = read_i32(data, 0).and_then(|size| usize::try_from(size).ok());
            }
            (Some(libc::IPPROTO_IP), Some(libc::IP_TOS)) => {
                // One byte on Linux; some kernels of other systems send an int.
                parsed.ecn = data.first().map(|tos| tos & 0b11);
            }
            (Some(libc::IPPROTO_IPV6), Some(libc::IPV6_TCLASS)) => {
                parsed.ecn = read_i32(data, 0).map(|class| (class & 0b11) as u8);
            }
            (Some(libc::IPPROTO_IP), Some(libc::IP_PKTINFO)) => {
                // struct in_pktinfo { int ifindex; in_addr spec_dst; in_addr addr; }
                if let Some(addr) = data.get(8..12) {
                    let octets: [u8; 4] = addr.try_into().unwrap_or_default();
                    parsed.destination = Some(IpAddr::V4(Ipv4Addr::from(octets)));
                }
            }
            (Some(libc::IPPROTO_IPV6), Some(libc::IPV6_PKTINFO)) => {
                // struct in6_pktinfo { in6_addr addr; unsigned ifindex; }
                if let Some(addr) = data.get(0..16) {
                    let octets: [u8; 16] = addr.try_into().unwrap_or_default();
                    parsed.destination = Some(IpAddr::V6(Ipv6Addr::from(octets)));
                }
            }
            _ => {}
        }
        control = control.get(align(len)..).unwrap_or_default();
    }
    parsed
}

/// Reads a source address as the kernel wrote it (`sockaddr_in` or `sockaddr_in6`).
pub(crate) fn parse_address(name: &[u8]) -> Option<SocketAddr> {
    let family = u16::from_ne_bytes(name.get(0..2)?.try_into().ok()?);
    let port = u16::from_be_bytes(name.get(2..4)?.try_into().ok()?);
    match i32::from(family) {
        libc::AF_INET => {
            let octets: [u8; 4] = name.get(4..8)?.try_into().ok()?;
            Some(SocketAddr::V4(SocketAddrV4::new(octets.into(), port)))
        }
        libc::AF_INET6 => {
            let flowinfo = u32::from_be_bytes(name.get(4..8)?.try_into().ok()?);
            let octets: [u8; 16] = name.get(8..24)?.try_into().ok()?;
            let scope_id = u32::from_ne_bytes(name.get(24..28)?.try_into().ok()?);
            Some(SocketAddr::V6(SocketAddrV6::new(
                octets.into(),
                port,
                flowinfo,
                scope_id,
            )))
        }
        _ => None,
    }
}

/// The control buffer of one send: a `UDP_SEGMENT` message (the GSO segment size) and a
/// packet info message (the source address, on a socket bound to a wildcard address),
/// each when wanted, aligned as the kernel reads them.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendControl {
    bytes: [u8; SEND_SPACE],
    len: usize,
}

/// `CMSG_SPACE(sizeof(u16))`.
const SEGMENT_SPACE: usize = HEADER + align(size_of::<u16>());

/// Room for both messages: the segment size and the larger packet info (IPv6's).
const SEND_SPACE: usize = SEGMENT_SPACE + HEADER + align(size_of::<libc::in6_pktinfo>());

impl SendControl {
    /// The messages saying `segment_size` (`UDP_SEGMENT`) and `source` (`IP_PKTINFO` or
    /// `IPV6_PKTINFO`: the address the datagrams leave from), each if given.
    pub(crate) fn new(segment_size: Option<u16>, source: Option<IpAddr>) -> Self {
        let mut control = Self {
            bytes: [0u8; SEND_SPACE],
            len: 0,
        };
        if let Some(size) = segment_size {
            control.push(libc::SOL_UDP, libc::UDP_SEGMENT, &size.to_ne_bytes());
        }
        match source {
            Some(IpAddr::V4(address)) => {
                // struct in_pktinfo { int ifindex; in_addr spec_dst; in_addr addr; }: on a
                // send, spec_dst is the source address (ifindex 0: any interface).
                let mut info = [0u8; size_of::<libc::in_pktinfo>()];
                info[4..8].copy_from_slice(&address.octets());
                control.push(libc::IPPROTO_IP, libc::IP_PKTINFO, &info);
            }
            Some(IpAddr::V6(address)) => {
                // struct in6_pktinfo { in6_addr addr; unsigned ifindex; }.
                let mut info = [0u8; size_of::<libc::in6_pktinfo>()];
                info[..16].copy_from_slice(&address.octets());
                control.push(libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, &info);
            }
            None => {}
        }
        control
    }

    /// Appends one message: its header (`cmsg_len` is `CMSG_LEN`: without the trailing
    /// padding), its data, and the padding to the next message (`CMSG_SPACE`).
    fn push(&mut self, level: i32, kind: i32, data: &[u8]) {
        let at = self.len;
        let word = size_of::<usize>();
        self.bytes[at..at + word].copy_from_slice(&(HEADER + data.len()).to_ne_bytes());
        self.bytes[at + word..at + word + 4].copy_from_slice(&level.to_ne_bytes());
        self.bytes[at + word + 4..at + word + 8].copy_from_slice(&kind.to_ne_bytes());
        self.bytes[at + HEADER..at + HEADER + data.len()].copy_from_slice(data);
        self.len = at + HEADER + align(data.len());
    }

    /// The buffer, for `msg_control`.
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.bytes.as_ptr()
    }

    /// Its length, for `msg_controllen`: 0 with no message.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Rounds `len` up to the alignment of control messages (`CMSG_ALIGN`).
const fn align(len: usize) -> usize {
    let word = size_of::<usize>();
    len.div_ceil(word) * word
}

fn read_usize(bytes: &[u8], at: usize) -> Option<usize> {
    Some(usize::from_ne_bytes(
        bytes.get(at..at + size_of::<usize>())?.try_into().ok()?,
    ))
}

fn read_i32(bytes: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One control message as the kernel lays it out.
    fn message(level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&(HEADER + data.len()).to_ne_bytes());
        bytes.extend_from_slice(&level.to_ne_bytes());
        bytes.extend_from_slice(&kind.to_ne_bytes());
        bytes.resize(HEADER, 0);
        bytes.extend_from_slice(data);
        bytes.resize(align(bytes.len()), 0);
        bytes
    }

    #[test]
    fn gro_ecn_and_destination_are_read() {
        let mut control = message(libc::SOL_UDP, libc::UDP_GRO, &1200i32.to_ne_bytes());
        control.extend(message(libc::IPPROTO_IP, libc::IP_TOS, &[0b10]));
        let mut pktinfo = vec![0u8; 12];
        pktinfo[8..12].copy_from_slice(&[127, 0, 0, 1]);
        control.extend(message(libc::IPPROTO_IP, libc::IP_PKTINFO, &pktinfo));
        assert_eq!(
            parse(&control),
            RecvControl {
                segment_size: Some(1200),
                ecn: Some(0b10),
                destination: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            }
        );

        let mut control = message(libc::IPPROTO_IPV6, libc::IPV6_TCLASS, &3i32.to_ne_bytes());
        let mut pktinfo = Ipv6Addr::LOCALHOST.octets().to_vec();
        pktinfo.extend_from_slice(&1u32.to_ne_bytes());
        control.extend(message(libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, &pktinfo));
        let parsed = parse(&control);
        assert_eq!(parsed.ecn, Some(3));
        assert_eq!(parsed.destination, Some(IpAddr::V6(Ipv6Addr::LOCALHOST)));
        assert_eq!(parsed.segment_size, None);
    }

    #[test]
    fn unknown_malformed_and_truncated_messages_are_survived() {
        let mut control = message(99, 99, &[1, 2, 3]);
        control.extend(message(
            libc::SOL_UDP,
            libc::UDP_GRO,
            &1000i32.to_ne_bytes(),
        ));
        assert_eq!(parse(&control).segment_size, Some(1000), "unknown skipped");

        // A length past the end, a length shorter than a header, and every truncation.
        let mut bad = message(libc::SOL_UDP, libc::UDP_GRO, &1000i32.to_ne_bytes());
        bad[..size_of::<usize>()].copy_from_slice(&4096usize.to_ne_bytes());
        assert_eq!(parse(&bad), RecvControl::default());
        bad[..size_of::<usize>()].copy_from_slice(&3usize.to_ne_bytes());
        assert_eq!(parse(&bad), RecvControl::default());
        for end in 0..control.len() {
            let _ = parse(&control[..end]);
        }
    }

    #[test]
    fn addresses_of_both_families_are_read() {
        let v4: SocketAddr = "192.0.2.7:4433".parse().unwrap();
        let mut name = vec![0u8; 16];
        name[0..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        name[2..4].copy_from_slice(&4433u16.to_be_bytes());
        name[4..8].copy_from_slice(&[192, 0, 2, 7]);
        assert_eq!(parse_address(&name), Some(v4));

        let v6: SocketAddr = "[2001:db8::1]:443".parse().unwrap();
        let mut name = vec![0u8; 28];
        name[0..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        name[2..4].copy_from_slice(&443u16.to_be_bytes());
        name[8..24].copy_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        assert_eq!(parse_address(&name), Some(v6));

        assert_eq!(parse_address(&name[..10]), None, "truncated");
        assert_eq!(parse_address(&[0u8; 28]), None, "no family");
    }

    #[test]
    fn the_segment_message_reads_back() {
        let control = SendControl::new(Some(1350), None);
        let bytes = &control.bytes;
        assert_eq!(control.len(), SEGMENT_SPACE);
        assert_eq!(read_usize(bytes, 0), Some(HEADER + 2));
        assert_eq!(read_i32(bytes, 8), Some(libc::SOL_UDP));
        assert_eq!(read_i32(bytes, 12), Some(libc::UDP_SEGMENT));
        assert_eq!(u16::from_ne_bytes([bytes[HEADER], bytes[HEADER + 1]]), 1350);
    }

    #[test]
    fn a_source_address_follows_the_segment_message_as_packet_info() {
        let v4 = SendControl::new(Some(1200), Some("192.0.2.7".parse().unwrap()));
        let bytes = &v4.bytes[..v4.len()];
        assert_eq!(v4.len(), SEGMENT_SPACE + HEADER + align(12));
        assert_eq!(read_usize(bytes, SEGMENT_SPACE), Some(HEADER + 12));
        assert_eq!(read_i32(bytes, SEGMENT_SPACE + 8), Some(libc::IPPROTO_IP));
        assert_eq!(read_i32(bytes, SEGMENT_SPACE + 12), Some(libc::IP_PKTINFO));
        let spec_dst = SEGMENT_SPACE + HEADER + 4;
        assert_eq!(&bytes[spec_dst..spec_dst + 4], &[192, 0, 2, 7]);

        let v6 = SendControl::new(None, Some(Ipv6Addr::LOCALHOST.into()));
        let bytes = &v6.bytes[..v6.len()];
        assert_eq!(read_i32(bytes, 12), Some(libc::IPV6_PKTINFO));
        assert_eq!(&bytes[HEADER..HEADER + 16], &Ipv6Addr::LOCALHOST.octets());
        // What the receive side reads back (the same layout).
        assert_eq!(
            parse(bytes).destination,
            Some(IpAddr::V6(Ipv6Addr::LOCALHOST))
        );

        assert_eq!(SendControl::new(None, None).len(), 0);
    }
}
