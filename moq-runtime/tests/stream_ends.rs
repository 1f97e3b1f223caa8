//! How streams end through the quiche adapter, on real QUIC connections (an in-memory
//! packet pump): a writer waiting for flow-control credit learns that the peer stopped
//! its stream, and streams whose reader lost interest give their stream credit back.

mod common;

use std::task::{Poll, Waker};

use bytes::Bytes;
use common::{BusyRuntime, connected_pair, pump, run_until};
use moqx_kio::Waiter;
use moqx_net::transport::{RecvStream, SendStream, Session, StreamError};
use moqx_runtime::quic::{QuicConnection, QuicRecvStream, QuicSession};

/// Regression: a writer parked for credit on a stream the peer then stopped was woken,
/// found quiche's answer for a collected stream (`Done`, as for "no room") and parked again,
/// forever.
#[test]
fn a_writer_waiting_for_credit_sees_the_peer_stop_its_stream() {
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, "stop-parked", b"moq-lite-05");
    let (mut client_session, mut server_session) = (client.session(), server.session());
    let waiter = Waiter::new(Waker::noop());

    let Poll::Ready(Ok(mut send)) = client_session.poll_open_uni(&waiter) else {
        panic!("a uni stream opens");
    };
    // More than the peer's stream window (1 MB in the test configuration): the writer
    // parks for credit once the window is full.
    let mut data = Bytes::from(vec![1u8; 3 << 20]);
    assert!(send.poll_write(&waiter, &mut data).is_pending());
    assert!(!data.is_empty(), "the window holds the rest back");

    let mut recv = accept_uni(&runtime, &client, &server, &mut server_session);
    recv.stop(42);

    let mut outcome = None;
    assert!(
        run_until(&runtime, &client, &server, || {
            if let Poll::Ready(result) = send.poll_write(&waiter, &mut data) {
                outcome = Some(result);
            }
            outcome.is_some()
        }),
        "the parked writer is told, not left waiting"
    );
    match outcome.unwrap() {
        Err(StreamError::Stopped(code)) => assert!(code == 42 || code == 0, "code {code}"),
        other => panic!("expected Stopped, got {other:?}"),
    }
    // And the same answer again, not a wait.
    assert!(matches!(
        send.poll_write(&waiter, &mut data),
        Poll::Ready(Err(StreamError::Stopped(_)))
    ));
}

/// Regression guard: quiche never frees a stream it was asked to stop sending, nor returns
/// its credit. A reader that loses interest (drops the stream before its end, as a
/// cancelled subscription's group reader does) must not cost the peer a stream for good:
/// the peer here may have 100 uni streams open, and opens 300 one after the other.
#[test]
fn streams_dropped_before_their_end_give_their_credit_back() {
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, "drop-credit", b"moq-lite-05");
    let (mut client_session, mut server_session) = (client.session(), server.session());
    let waiter = Waiter::new(Waker::noop());
    let idle = server.bookkeeping();

    for round in 0..300 {
        let mut send = None;
        assert!(
            run_until(&runtime, &client, &server, || {
                if let Poll::Ready(Ok(stream)) = client_session.poll_open_uni(&waiter) {
                    send = Some(stream);
                }
                send.is_some()
            }),
            "stream {round} opens: the credit of the ones before came back"
        );
        let mut send = send.unwrap();
        let mut first = Bytes::from_static(b"first part");
        assert!(send.poll_write(&waiter, &mut first).is_ready());

        let mut recv = accept_uni(&runtime, &client, &server, &mut server_session);
        assert!(matches!(recv.poll_read(&waiter), Poll::Ready(Ok(Some(_)))));
        // Not interested in the rest: the reader goes before the stream ends.
        drop(recv);

        let mut rest = Bytes::from_static(b"the rest, which nobody reads");
        assert!(send.poll_write_final(&waiter, &mut rest).is_ready());
        drop(send);
        pump(&client, &server);
        pump(&server, &client);
    }
    assert!(
        run_until(&runtime, &client, &server, || server.bookkeeping() == idle),
        "the server's bookkeeping returns to idle: {:?} vs {idle:?}",
        server.bookkeeping()
    );
}

/// The next uni stream the client opened, accepted by the server.
fn accept_uni(
    runtime: &BusyRuntime,
    client: &QuicConnection,
    server: &QuicConnection,
    session: &mut QuicSession,
) -> QuicRecvStream {
    let waiter = Waiter::new(Waker::noop());
    let mut accepted = None;
    assert!(run_until(runtime, client, server, || {
        if let Poll::Ready(Ok(stream)) = session.poll_accept_uni(&waiter) {
            accepted = Some(stream);
        }
        accepted.is_some()
    }));
    accepted.expect("accepted")
}
