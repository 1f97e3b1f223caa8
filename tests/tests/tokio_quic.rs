//! The conformance scenarios on the tokio driver over raw QUIC (`moqt://`), real sockets
//! on loopback.

mod support;

moq_conformance::conformance_tests!(support::TokioHarness::new("moqt"));

mod across_versions {
    moq_conformance::cross_version_tests!(super::support::TokioHarness::new("moqt"));
}

mod moq_transport {
    moq_conformance::moq_transport_version_tests!(super::support::TokioHarness::new("moqt"));
}

/// Through the impairment proxy, under each condition of `moq_conformance::impaired`.
mod impaired {
    moq_conformance::impaired_tests!(|impairment, seed| {
        super::support::TokioHarness::new("moqt").impaired(impairment, seed)
    });
}

/// Review finding F9: datagrams were a fixed 1,350 bytes, so a path with a smaller MTU
/// (IPv6 tunnels at 1,280, VPNs) could not even complete a handshake: the kernel refused
/// every full-size packet (Don't Fragment). Packets now start at 1,200 bytes and probe
/// upwards. On a loopback of MTU 1,300 (IPv4) and 1,280 (IPv6): the handshake and a
/// megabyte frame, no send refused, and probes past the MTU refused and given up.
mod small_path_mtu {
    use std::net::Ipv6Addr;

    use super::support::{TokioHarness, netns};
    use moq_conformance::scenarios::a_burst_of_groups_and_a_megabyte_frame_arrive_intact_and_in_order as megabyte;

    #[test]
    fn ipv4_at_1300_bytes() {
        netns::loopback_with_mtu(1300);
        let mut harness = TokioHarness::new("moqt");
        megabyte(&mut harness);
        assert!(
            harness.mtu_probes_refused() > 0,
            "PMTU discovery probed past 1,300"
        );
    }

    #[test]
    fn ipv6_at_1280_bytes() {
        netns::loopback_with_mtu(1280);
        let mut harness = TokioHarness::new("moqt").on(Ipv6Addr::LOCALHOST.into());
        megabyte(&mut harness);
        assert!(
            harness.mtu_probes_refused() > 0,
            "PMTU discovery probed past 1,280"
        );
    }

    #[test]
    fn webtransport_ipv4_at_1300_bytes() {
        netns::loopback_with_mtu(1300);
        let mut harness = TokioHarness::new("https");
        megabyte(&mut harness);
    }
}

/// Review finding F10: a server bound to a wildcard address answered from whatever
/// address the kernel picked, so a client that reached a secondary address or a VIP got
/// replies from another and discarded them (RFC 9000 §9). Replies now leave from the
/// address each connection's packets arrived at. Through a proxy whose sockets are
/// connected to that address (the kernel drops replies from any other): the handshake
/// and a megabyte frame.
mod source_address {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::support::{TokioHarness, netns};
    use moq_conformance::scenarios::a_burst_of_groups_and_a_megabyte_frame_arrive_intact_and_in_order as megabyte;

    #[test]
    fn ipv4_replies_come_from_the_second_address_the_client_reached() {
        let mut harness = TokioHarness::new("moqt").reached_at(
            Ipv4Addr::UNSPECIFIED.into(),
            Ipv4Addr::new(127, 0, 0, 2).into(),
        );
        megabyte(&mut harness);
    }

    #[test]
    fn ipv6_replies_come_from_the_second_address_the_client_reached() {
        netns::loopback_with_address("fd00::2/128");
        let reached: Ipv6Addr = "fd00::2".parse().unwrap();
        let mut harness =
            TokioHarness::new("moqt").reached_at(Ipv6Addr::UNSPECIFIED.into(), reached.into());
        megabyte(&mut harness);
    }

    #[test]
    fn webtransport_replies_come_from_the_second_address_the_client_reached() {
        let mut harness = TokioHarness::new("https").reached_at(
            Ipv4Addr::UNSPECIFIED.into(),
            Ipv4Addr::new(127, 0, 0, 2).into(),
        );
        megabyte(&mut harness);
    }
}
