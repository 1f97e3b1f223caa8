//! The conformance scenarios on the tokio driver's thread-per-core mode, over both
//! bindings, with 2 and with 4 workers (more workers than this machine's cores: they share
//! them in turn). Sessions of one scenario land on different workers and meet only in the
//! shared model.

mod support;

mod quic_two_workers {
    moq_conformance::conformance_tests!(super::support::TokioHarness::per_core("moqt", 2));
}

mod quic_four_workers {
    moq_conformance::conformance_tests!(super::support::TokioHarness::per_core("moqt", 4));
}

mod webtransport_two_workers {
    moq_conformance::conformance_tests!(super::support::TokioHarness::per_core("https", 2));
}

mod webtransport_four_workers {
    moq_conformance::conformance_tests!(super::support::TokioHarness::per_core("https", 4));
}
