//! The adapter's per-packet walk, on a pair of connections in memory: what a received
//! packet touches (`state.rs`), and what a stream's bookkeeping costs (`connection.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Poll, Wake, Waker};

use bytes::Bytes;
use moqx_kio::Waiter;
use moqx_net::coding::Version;
use moqx_net::transport::{RecvStream, SendStream, Session, StreamPriority};

use super::{QuicConnection, QuicRecvStream};
use crate::binding::Binding;
use crate::quiche_config::{QuicLimits, client_config, server_config};
use crate::tls::Certificate;

/// A waker that counts its wakes.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn counting() -> (Arc<Count>, Waiter) {
    let count = Arc::new(Count::default());
    let waiter = Waiter::new(&Waker::from(count.clone()));
    (count, waiter)
}

/// Moves every packet `from` has to `to`.
fn pump(from: &QuicConnection, to: &QuicConnection) {
    let mut buffer = [0u8; 65_536];
    while let Ok(Some((len, info))) = from.send(&mut buffer) {
        let _ = to.recv(&mut buffer[..len], info.from, info.to);
    }
}

/// A client and a server connection over raw QUIC, before their handshake.
fn unconnected() -> (QuicConnection, QuicConnection) {
    unconnected_with(&QuicLimits::default())
}

/// The same, both sides configured with `limits`.
fn unconnected_with(limits: &QuicLimits) -> (QuicConnection, QuicConnection) {
    let certificate = Certificate::self_signed(&["localhost".into()]).unwrap();
    let versions = [Version::Lite05];
    let (client_address, server_address) = (
        "127.0.0.1:4000".parse().unwrap(),
        "127.0.0.1:4433".parse().unwrap(),
    );
    let client = QuicConnection::new(
        quiche::connect(
            Some("localhost"),
            &quiche::ConnectionId::from_ref(&[3; 16]),
            client_address,
            server_address,
            &mut client_config(Binding::Quic, &versions, false, limits).unwrap(),
        )
        .unwrap(),
    );
    let server = QuicConnection::new(
        quiche::accept(
            &quiche::ConnectionId::from_ref(&[4; 16]),
            None,
            server_address,
            client_address,
            &mut server_config(&certificate, limits, &versions).unwrap(),
        )
        .unwrap(),
    );
    (client, server)
}

/// A client and a server connection, handshake done, over raw QUIC.
fn pair() -> (QuicConnection, QuicConnection) {
    handshake(unconnected())
}

/// `(client, server)` after their handshake.
fn handshake(
    (client, server): (QuicConnection, QuicConnection),
) -> (QuicConnection, QuicConnection) {
    for _ in 0..10 {
        pump(&client, &server);
        pump(&server, &client);
    }
    assert!(client.is_established() && server.is_established());
    (client, server)
}

/// Opens a uni stream from `client` with `first` on it, and accepts it on `server`.
fn stream(
    client: &QuicConnection,
    server: &QuicConnection,
    first: &'static str,
) -> (super::QuicSendStream, QuicRecvStream) {
    let waiter = Waiter::new(Waker::noop());
    let Poll::Ready(Ok(mut send)) = client.session().poll_open_uni(&waiter) else {
        panic!("a stream opens at once");
    };
    assert!(send.poll_write(&waiter, &mut Bytes::from(first)).is_ready());
    pump(client, server);
    let Poll::Ready(Ok(mut recv)) = server.session().poll_accept_uni(&waiter) else {
        panic!("the stream arrived");
    };
    let Poll::Ready(Ok(Some(read))) = recv.poll_read(&waiter) else {
        panic!("its first bytes arrived");
    };
    assert_eq!(read, first);
    (send, recv)
}

#[test]
fn a_packet_wakes_the_readers_of_the_streams_it_carries_and_no_other() {
    let (client, server) = pair();
    let (mut quiet_send, mut quiet) = stream(&client, &server, "a");
    let (mut busy_send, mut busy) = stream(&client, &server, "b");
    let (quiet_wakes, quiet_waiter) = counting();
    let (busy_wakes, busy_waiter) = counting();
    assert!(quiet.poll_read(&quiet_waiter).is_pending());
    assert!(busy.poll_read(&busy_waiter).is_pending());

    let waiter = Waiter::new(Waker::noop());
    assert!(
        busy_send
            .poll_write(&waiter, &mut Bytes::from("more"))
            .is_ready()
    );
    pump(&client, &server);
    assert_eq!(
        busy_wakes.0.load(Ordering::Relaxed),
        1,
        "the reader with data"
    );
    assert_eq!(quiet_wakes.0.load(Ordering::Relaxed), 0, "a reader without");
    assert!(matches!(
        busy.poll_read(&busy_waiter),
        Poll::Ready(Ok(Some(_)))
    ));

    // The quiet stream's own data wakes its reader in turn.
    assert!(
        quiet_send
            .poll_write(&waiter, &mut Bytes::from("now"))
            .is_ready()
    );
    pump(&client, &server);
    assert_eq!(quiet_wakes.0.load(Ordering::Relaxed), 1);
    assert_eq!(busy_wakes.0.load(Ordering::Relaxed), 1);
}

#[test]
fn a_streams_bookkeeping_goes_with_its_last_handle() {
    let (client, server) = pair();
    let before = server.bookkeeping();
    let (mut send, recv) = stream(&client, &server, "x");
    assert_eq!(server.bookkeeping().streams, before.streams + 1);
    // Dropped before its end: the rest is read away as it arrives, and the entry stays
    // until the FIN (which the client holds until its bytes are acknowledged).
    drop(recv);
    assert_eq!(server.bookkeeping().streams, before.streams + 1);
    send.finish().unwrap();
    for _ in 0..4 {
        pump(&client, &server);
        pump(&server, &client);
        // A held FIN goes out at its timer (`fins.rs`): run it as if it were due.
        client.on_timeout(std::time::Instant::now() + std::time::Duration::from_secs(1));
    }
    assert_eq!(
        server.bookkeeping().streams,
        before.streams,
        "{:?}",
        server.bookkeeping()
    );
}

#[test]
fn the_handshake_wakes_its_waiter_once_it_completes() {
    let (client, server) = unconnected();
    let (wakes, waiter) = counting();
    assert!(client.poll_established(&waiter).is_pending());
    for _ in 0..10 {
        pump(&client, &server);
        pump(&server, &client);
    }
    assert!(wakes.0.load(Ordering::Relaxed) >= 1, "woken");
    assert_eq!(client.poll_established(&waiter), Poll::Ready(true));
}

/// A stream counts against the peer's limit from its open, before anything is written on
/// it: opening more than the peer allows waits for its credit instead of overrunning it.
#[test]
fn streams_opened_before_any_write_count_against_the_peers_limit() {
    let limits = QuicLimits {
        max_streams: 3,
        ..QuicLimits::default()
    };
    let (client, server) = handshake(unconnected_with(&limits));
    let (credit, waiter) = counting();
    let mut session = client.session();
    let mut opened: Vec<_> = (0..3)
        .map(|_| match session.poll_open_uni(&waiter) {
            Poll::Ready(Ok(send)) => send,
            _ => panic!("the peer allows three"),
        })
        .collect();
    assert!(
        session.poll_open_uni(&waiter).is_pending(),
        "a fourth waits for credit"
    );
    // Each carries its bytes to its end; the server reads them all, and its MAX_STREAMS
    // lets the fourth open.
    for (index, send) in opened.iter_mut().enumerate() {
        let mut bytes = Bytes::from(format!("stream {index}"));
        assert!(send.poll_write(&waiter, &mut bytes).is_ready());
        send.finish().unwrap();
    }
    pump(&client, &server);
    let mut server_session = server.session();
    for _ in 0..3 {
        let Poll::Ready(Ok(mut recv)) = server_session.poll_accept_uni(&waiter) else {
            panic!("every opened stream arrived");
        };
        while let Poll::Ready(Ok(Some(_))) = recv.poll_read(&waiter) {}
    }
    for _ in 0..4 {
        pump(&server, &client);
        pump(&client, &server);
    }
    assert!(
        credit.0.load(Ordering::Relaxed) > 0,
        "the credit woke the opener"
    );
    assert!(
        session.poll_open_uni(&waiter).is_ready(),
        "the fourth opens once the peer gave credit"
    );
}

/// Group streams go in moq-lite's order from their first packet: of two groups written
/// together, the newer one's bytes go first (quiche alone would send the older, lower
/// stream ID first).
#[test]
fn a_newer_group_stream_is_sent_before_an_older_one() {
    let (client, server) = pair();
    let waiter = Waiter::new(Waker::noop());
    let mut session = client.session();
    let mut open = |group| match session.poll_open_uni(&waiter) {
        Poll::Ready(Ok(mut send)) => {
            send.set_priority(StreamPriority {
                subscriber: 0,
                group,
            });
            send
        }
        _ => panic!("a stream opens at once"),
    };
    let (mut older, mut newer) = (open(1), open(2));
    // More than one packet each: the first packet holds only the more urgent stream.
    for (send, byte) in [(&mut older, b'o'), (&mut newer, b'n')] {
        let mut bytes = Bytes::from(vec![byte; 4_000]);
        assert!(send.poll_write(&waiter, &mut bytes).is_ready());
    }
    let mut buffer = [0u8; 65_536];
    let Ok(Some((len, info))) = client.send(&mut buffer) else {
        panic!("a packet to send");
    };
    server.recv(&mut buffer[..len], info.from, info.to).unwrap();
    let mut server_session = server.session();
    let Poll::Ready(Ok(mut first)) = server_session.poll_accept_uni(&waiter) else {
        panic!("a stream arrived");
    };
    let Poll::Ready(Ok(Some(read))) = first.poll_read(&waiter) else {
        panic!("its bytes arrived");
    };
    assert!(
        read.iter().all(|&byte| byte == b'n'),
        "the newer group first"
    );
    assert!(
        server_session.poll_accept_uni(&waiter).is_pending(),
        "the older group waits for the next packet"
    );
}
