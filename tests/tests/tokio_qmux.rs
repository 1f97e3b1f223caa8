//! The conformance scenarios on the tokio driver over QMux: a WebSocket (`ws://`, and
//! `wss://` over TLS), TLS (`tls://`) and plain TCP (`tcp://`), real sockets on loopback.

mod support;

mod websocket {
    moq_conformance::conformance_tests!(super::support::TokioHarness::new("ws"));

    mod across_versions {
        moq_conformance::cross_version_tests!(super::super::support::TokioHarness::new("ws"));
    }
}

mod websocket_over_tls {
    moq_conformance::conformance_tests!(super::support::TokioHarness::new("wss"));
}

mod tls {
    moq_conformance::conformance_tests!(super::support::TokioHarness::new("tls"));
}

mod tcp {
    moq_conformance::conformance_tests!(super::support::TokioHarness::new("tcp"));
}
