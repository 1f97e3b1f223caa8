//! The conformance scenarios on the tokio driver over raw QUIC (`moqt://`), real sockets
//! on loopback.

mod support;

moq_conformance::conformance_tests!(support::TokioHarness::new("moqt"));
