//! What the virtual-time scenario files share: the public simulation kit
//! (`moqx_net::sim`, which a user's tests use the same way), a live track through a
//! relay, and hand-driven raw clients for the bad-peer scenarios.

use bytes::Bytes;
use moqx_net::model::TrackProducer;
use moqx_net::runtime::test::TestRuntime;
use moqx_net::session::{self, Session};

// `send` is used by some of the files that include this one.
#[allow(unused_imports)]
pub(crate) use moqx_net::sim::{Received, Relay, SECOND, publisher, read_track, send, subscriber};

/// A relay, a publisher of `live`/`video`, and a subscriber already reading it.
pub(crate) fn live(
    runtime: &TestRuntime,
    relay: &mut Relay,
) -> (Session, TrackProducer, Session, Received) {
    let (publisher_session, broadcast, track) = publisher(runtime, relay, "live", "video");
    std::mem::forget(broadcast); // published for the whole test
    let (subscriber_session, origin) = subscriber(runtime, relay);
    assert!(runtime.run_until(SECOND, || origin.consume_broadcast("live").is_some()));
    let received = read_track(runtime, &origin, "live", "video");
    assert!(runtime.run_until(SECOND, || track.consumer_count() > 0));
    (publisher_session, track, subscriber_session, received)
}

/// A hand-driven client of `relay`: raw streams, no session machine.
pub(crate) fn raw_client(
    runtime: &TestRuntime,
    relay: &mut Relay,
) -> moqx_net::runtime::test::TestTransport {
    let (client_end, relay_end) = runtime.connect(relay.link.clone());
    relay
        .sessions
        .push(session::accept(runtime.clone(), relay_end, relay.config()));
    client_end
}

/// Opens a uni stream and writes `bytes` to it, then FIN.
pub(crate) fn write_uni(transport: &mut moqx_net::runtime::test::TestTransport, bytes: &[u8]) {
    use moqx_net::transport::{SendStream, Session as _};
    let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
    let std::task::Poll::Ready(Ok(mut stream)) = transport.poll_open_uni(&waiter) else {
        panic!("the test transport opens at once");
    };
    let _ = stream.poll_write(&waiter, &mut Bytes::copy_from_slice(bytes));
    let _ = stream.finish();
}

/// Opens a bidi stream and writes `bytes` to it, then FIN.
pub(crate) fn write_bidi(transport: &mut moqx_net::runtime::test::TestTransport, bytes: &[u8]) {
    use moqx_net::transport::{SendStream, Session as _};
    let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
    let std::task::Poll::Ready(Ok((mut send, recv))) = transport.poll_open_bidi(&waiter) else {
        panic!("the test transport opens at once");
    };
    std::mem::forget(recv); // keep the receive half open
    let _ = send.poll_write(&waiter, &mut Bytes::copy_from_slice(bytes));
    let _ = send.finish();
}

/// The code the relay closed a raw client's connection with, once it did.
pub(crate) fn close_code(
    runtime: &TestRuntime,
    transport: &mut moqx_net::runtime::test::TestTransport,
) -> Option<u64> {
    use moqx_net::transport::{Session as _, TransportError};
    let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
    let mut code = None;
    runtime.run_until(SECOND, || match transport.poll_closed(&waiter) {
        std::task::Poll::Ready(TransportError::Closed { code: c, .. }) => {
            code = Some(c);
            true
        }
        _ => false,
    });
    code
}

/// The minimal valid client SETUP stream: type 1, length 1, no parameters.
pub(crate) const SETUP: &[u8] = &[0x01, 0x01, 0x00];

/// Opens a stream (uni, or bidi keeping its receive half) and writes `bytes`, leaving it
/// open: a peer that says a message is coming and keeps sending.
pub(crate) fn write_open(
    transport: &mut moqx_net::runtime::test::TestTransport,
    bidi: bool,
    bytes: &[u8],
) {
    use moqx_net::transport::{SendStream, Session as _};
    let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
    let mut send = if bidi {
        let std::task::Poll::Ready(Ok((send, recv))) = transport.poll_open_bidi(&waiter) else {
            panic!("the test transport opens at once");
        };
        std::mem::forget(recv);
        send
    } else {
        let std::task::Poll::Ready(Ok(send)) = transport.poll_open_uni(&waiter) else {
            panic!("the test transport opens at once");
        };
        send
    };
    let _ = send.poll_write(&waiter, &mut Bytes::copy_from_slice(bytes));
    std::mem::forget(send); // never FIN, never reset: the bytes keep "coming"
}
