//! WebTransport handshakes on a connected pair: what the WebTransport tests and the
//! stream-lifetime tests share.

use std::task::{Poll, Waker};

use moqx_kio::Waiter;
use moqx_runtime::quic::QuicConnection;
use moqx_runtime::webtransport::{
    ClientHandshake, ServerHandshake, WebTransportError, WebTransportRequest, WebTransportSession,
};

use super::{BusyRuntime, connected_pair, run_until};

/// The URL every WebTransport test client asks for.
pub(crate) const URL: &str = "https://localhost:4433/room/7?jwt=abc";

/// Runs both handshakes until the server has the client's request.
pub(crate) fn request(
    runtime: &BusyRuntime,
    client: &QuicConnection,
    server: &QuicConnection,
    protocols: &[&str],
) -> (ClientHandshake, WebTransportRequest) {
    let waiter = Waiter::new(Waker::noop());
    let mut client_side = ClientHandshake::new(
        client.session(),
        URL.parse().unwrap(),
        protocols.iter().map(|p| p.to_string()).collect(),
    );
    let mut server_side = ServerHandshake::new(server.session());
    let mut request = None;
    assert!(
        run_until(runtime, client, server, || {
            if let Poll::Ready(result) = client_side.poll(&waiter) {
                panic!("the client finished before the server saw its request: {result:?}");
            }
            if let Poll::Ready(result) = server_side.poll(&waiter) {
                request = Some(result.expect("the request is well formed"));
            }
            request.is_some()
        }),
        "the CONNECT reaches the server"
    );
    (client_side, request.unwrap())
}

/// Runs the client's handshake to its end.
pub(crate) fn finish(
    runtime: &BusyRuntime,
    client: &QuicConnection,
    server: &QuicConnection,
    mut client_side: ClientHandshake,
) -> Result<WebTransportSession, WebTransportError> {
    let waiter = Waiter::new(Waker::noop());
    let mut outcome = None;
    assert!(run_until(runtime, client, server, || {
        if let Poll::Ready(result) = client_side.poll(&waiter) {
            outcome = Some(result);
        }
        outcome.is_some()
    }));
    outcome.unwrap()
}

/// A WebTransport session pair, `moq-lite-05` negotiated.
pub(crate) fn established(
    runtime: &BusyRuntime,
    name: &str,
) -> (
    QuicConnection,
    QuicConnection,
    WebTransportSession,
    WebTransportSession,
) {
    let (client, server) = connected_pair(runtime, name, b"h3");
    let (client_side, request) = request(runtime, &client, &server, &["moq-lite-05"]);
    let server_session = request.accept(Some("moq-lite-05"));
    let client_session = finish(runtime, &client, &server, client_side).expect("accepted");
    (client, server, client_session, server_session)
}
