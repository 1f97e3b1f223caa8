//! The conformance scenarios on the tokio driver over WebTransport (`https://`), real
//! sockets on loopback.

mod support;

moq_conformance::conformance_tests!(support::TokioHarness::new("https"));

mod across_versions {
    moq_conformance::cross_version_tests!(super::support::TokioHarness::new("https"));
}

mod moq_transport {
    moq_conformance::moq_transport_version_tests!(super::support::TokioHarness::new("https"));
}

/// Through the impairment proxy, under each condition of `moq_conformance::impaired`.
mod impaired {
    moq_conformance::impaired_tests!(|impairment, seed| {
        super::support::TokioHarness::new("https").impaired(impairment, seed)
    });
}
