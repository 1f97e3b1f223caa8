//! Our QMux (`moqx_qmux`) against another implementation: the published `qmux` crate, the
//! one deployed MoQ relays and clients run, over real TCP on loopback, each side the
//! client once. Streams both ways carry their bytes and their ends, and a close carries
//! its code and reason.

use std::future::poll_fn;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use moqx_net::transport::{RecvStream as _, SendStream as _, Session as _, TransportError};
use moqx_qmux::record::{RecordReader, frame_record};
use moqx_qmux::{Config, Connection, QmuxConnection, QmuxSession, Side, Version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use web_transport_trait::{RecvStream as _, SendStream as _, Session as _};

/// The bound on the whole exchange: against hangs, not a speed threshold.
const PATIENCE: Duration = Duration::from_secs(10);

/// Runs our side of a connection over `stream`: records in and out, the timer ignored (a
/// test lasts less than a keep-alive).
fn ours(stream: TcpStream, side: Side, applications: Vec<String>) -> QmuxConnection {
    let config = Config::default();
    let limit = config.max_record_size;
    let connection = QmuxConnection::new(Connection::new(
        side,
        Version::Draft01,
        config,
        applications,
        Instant::now(),
    ));
    let (mut read, mut write) = stream.into_split();
    let inbound = connection.clone();
    tokio::spawn(async move {
        let mut reader = RecordReader::new(true, limit);
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match read.read(&mut buf).await {
                Ok(0) | Err(_) => {
                    inbound.with(|inner| inner.handle_carrier_closed("the peer closed"));
                    return;
                }
                Ok(n) => n,
            };
            reader.buffer().extend_from_slice(&buf[..n]);
            while let Ok(Some(record)) = reader.next_record() {
                inbound.handle_record(record, Instant::now());
            }
        }
    });
    let outbound = connection.clone();
    tokio::spawn(async move {
        loop {
            let record = poll_fn(|cx| match outbound.poll_transmit(cx.waker()) {
                Some(record) => Poll::Ready(Some(record)),
                None if outbound.closed().is_some() => Poll::Ready(None),
                None => Poll::Pending,
            })
            .await;
            let Some(record) = record else {
                let _ = write.shutdown().await;
                return;
            };
            let mut framed = bytes::BytesMut::new();
            frame_record(&record, true, &mut framed);
            if write.write_all(&framed).await.is_err() {
                return;
            }
        }
    });
    connection
}

async fn accept_uni(session: &mut QmuxSession) -> moqx_qmux::QmuxRecvStream {
    moqx_kio::wait(|waiter| session.poll_accept_uni(waiter))
        .await
        .expect("a stream")
}

async fn read_to_end(stream: &mut moqx_qmux::QmuxRecvStream) -> Vec<u8> {
    let mut bytes = Vec::new();
    while let Some(chunk) = moqx_kio::wait(|waiter| stream.poll_read(waiter))
        .await
        .expect("reads")
    {
        bytes.extend_from_slice(&chunk);
    }
    bytes
}

async fn write_final(stream: &mut moqx_qmux::QmuxSendStream, data: &[u8]) {
    let mut data = Bytes::copy_from_slice(data);
    moqx_kio::wait(|waiter| stream.poll_write_final(waiter, &mut data))
        .await
        .expect("writes");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn the_qmux_crate_as_client_talks_to_ours() {
    runtime().block_on(async {
        tokio::time::timeout(PATIENCE, async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            let server = async {
                let (stream, _) = listener.accept().await.unwrap();
                ours(stream, Side::Server, vec!["moq-lite-05".into()])
            };
            let client = qmux::tcp::Config::new(qmux::Version::QMux01)
                .protocols(["moq-lite-05"])
                .connect(address);
            let (ours, theirs) = tokio::join!(server, client);
            let theirs = theirs.expect("the qmux crate connects");
            assert_eq!(theirs.protocol(), Some("moq-lite-05"), "negotiated in band");
            let mut session = ours.session(Some("moq-lite-05".into()));

            // Their unidirectional stream to us, with its end.
            let mut send = theirs.open_uni().await.unwrap();
            send.write_all(b"hello from the qmux crate").await.unwrap();
            send.finish().unwrap();
            let mut recv = accept_uni(&mut session).await;
            assert_eq!(read_to_end(&mut recv).await, b"hello from the qmux crate");

            // Our bidirectional stream to them: a request and its answer, both ended.
            let (mut request, mut answer) = moqx_kio::wait(|waiter| session.poll_open_bidi(waiter))
                .await
                .unwrap();
            write_final(&mut request, &[7u8; 100_000]).await;
            let (mut their_send, mut their_recv) = theirs.accept_bi().await.unwrap();
            assert_eq!(their_recv.read_all().await.unwrap().len(), 100_000);
            their_send.write_all(b"done").await.unwrap();
            their_send.finish().unwrap();
            assert_eq!(read_to_end(&mut answer).await, b"done");

            // Our close reaches them with its code and reason.
            session.close(0x17, "bye");
            let error = theirs.closed().await;
            let said = web_transport_trait::Error::session_error(&error);
            assert_eq!(said, Some((0x17, "bye".to_owned())), "{error}");
        })
        .await
        .expect("no hang");
    });
}

#[test]
fn ours_as_client_talks_to_the_qmux_crate() {
    runtime().block_on(async {
        tokio::time::timeout(PATIENCE, async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            let server = async {
                let (stream, _) = listener.accept().await.unwrap();
                qmux::tcp::Config::new(qmux::Version::QMux01)
                    .protocols(["moq-lite-05"])
                    .accept(stream)
                    .await
                    .expect("the qmux crate accepts")
            };
            let client = async {
                let stream = TcpStream::connect(address).await.unwrap();
                ours(stream, Side::Client, vec!["moq-lite-05".into()])
            };
            let (theirs, ours) = tokio::join!(server, client);
            let mut session = ours.session(Some("moq-lite-05".into()));

            // Ours to theirs, several streams at once.
            for index in 0..5u8 {
                let mut send = moqx_kio::wait(|waiter| session.poll_open_uni(waiter))
                    .await
                    .unwrap();
                write_final(&mut send, &[index; 20_000]).await;
            }
            for _ in 0..5 {
                let mut recv = theirs.accept_uni().await.unwrap();
                let bytes = recv.read_all().await.unwrap();
                assert_eq!(bytes.len(), 20_000);
                assert!(bytes.iter().all(|&byte| byte == bytes[0]));
            }

            // Their reset reaches us with its code.
            let mut send = theirs.open_uni().await.unwrap();
            send.write_all(b"part").await.unwrap();
            send.reset(9);
            let mut recv = accept_uni(&mut session).await;
            let mut outcome = Ok(None);
            for _ in 0..2 {
                outcome = moqx_kio::wait(|waiter| recv.poll_read(waiter)).await;
                if outcome.is_err() {
                    break;
                }
            }
            assert_eq!(outcome, Err(moqx_net::transport::StreamError::Reset(9)));

            // Their close reaches us with its code and reason.
            theirs.close(0x21, "done");
            let error = moqx_kio::wait(|waiter| session.poll_closed(waiter)).await;
            assert_eq!(
                error,
                TransportError::Closed {
                    code: 0x21,
                    reason: "done".into(),
                    remote: true
                }
            );
        })
        .await
        .expect("no hang");
    });
}
