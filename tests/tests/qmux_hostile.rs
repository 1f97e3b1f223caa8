//! Hostile QMux peers against the tokio listener, over real TCP: one per limit QMux adds
//! (the record size, the stream limit, a peer gone silent). Each is closed with the code
//! the draft names, or given up at the idle timeout, and the listener goes on serving.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use moqx_net::session::SessionConfig;
use moqx_qmux::TransportParameters;
use moqx_qmux::frame::{Frame, Lengthless};
use moqx_qmux::record::{RecordReader, frame_record};
use moqx_runtime::binding::Binding;
use moqx_tokio::{QmuxListener, QmuxServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The bound on each exchange: against hangs, not a speed threshold.
const PATIENCE: Duration = Duration::from_secs(10);

/// A client's first record: its transport parameters, offering moq-lite-05.
fn parameters() -> Bytes {
    let parameters = TransportParameters {
        initial_max_data: 1 << 20,
        initial_max_stream_data_uni: 1 << 16,
        initial_max_stream_data_bidi_local: 1 << 16,
        initial_max_stream_data_bidi_remote: 1 << 16,
        initial_max_streams_uni: 100,
        initial_max_streams_bidi: 100,
        application_protocols: vec!["moq-lite-05".into()],
        ..TransportParameters::default()
    };
    record(&[Frame::TransportParameters(parameters.encode(true))])
}

fn record(frames: &[Frame]) -> Bytes {
    let mut payload = BytesMut::new();
    for frame in frames {
        frame.encode(&mut payload);
    }
    let mut out = BytesMut::new();
    frame_record(&payload, true, &mut out);
    out.freeze()
}

/// Reads what the server sends until it ends the connection; returns the transport code
/// of its CONNECTION_CLOSE, if it sent one.
async fn close_code(stream: &mut TcpStream) -> Option<u64> {
    let mut reader = RecordReader::new(true, 1 << 20);
    let mut buf = vec![0u8; 16 * 1024];
    let mut code = None;
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return code,
            Ok(n) => n,
        };
        reader.buffer().extend_from_slice(&buf[..n]);
        while let Ok(Some(mut frames)) = reader.next_record() {
            while let Ok(frame) = Frame::decode(&mut frames, Lengthless::RunsToEnd) {
                if let Frame::ConnectionClose { code: sent, .. } = frame {
                    code = Some(sent);
                }
            }
        }
    }
}

async fn listener(idle_timeout: Duration) -> (QmuxListener, SocketAddr) {
    let mut config = QmuxServerConfig::new(SessionConfig::default());
    config.limits.idle_timeout = idle_timeout;
    config.limits.max_streams = 4;
    let listener = QmuxListener::bind("127.0.0.1:0".parse().unwrap(), Binding::Tcp, config)
        .await
        .expect("binds");
    let address = listener.local_addr();
    (listener, address)
}

/// A well-behaved client still gets a session from `listener`.
async fn still_serving(listener: &mut QmuxListener, address: SocketAddr) {
    let url = format!("tcp://{address}/");
    let connecting = moqx_tokio::connect(&url, moqx_tokio::ClientConfig::default());
    let accepting = async {
        listener.accept().await.expect("a request").accept();
    };
    let (client, ()) = tokio::join!(connecting, accepting);
    client.expect("a client after the hostile one connects");
}

fn run(test: impl std::future::Future<Output = ()>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        tokio::time::timeout(PATIENCE * 2, test)
            .await
            .expect("no hang");
    });
}

#[test]
fn a_record_over_the_limit_is_refused_before_it_is_read() {
    run(async {
        let (mut listener, address) = listener(Duration::from_secs(30)).await;
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(&parameters()).await.unwrap();
        // A record declaring a megabyte: only its size is sent.
        let mut size = BytesMut::new();
        moqx_net::coding::varint::write_varint(&mut size, 1 << 20, "size").unwrap();
        stream.write_all(&size).await.unwrap();
        assert_eq!(
            close_code(&mut stream).await,
            Some(0x07),
            "FRAME_ENCODING_ERROR"
        );
        // The listener gave its request anyway (the parameters were fine): drop it.
        drop(listener.accept().await);
        still_serving(&mut listener, address).await;
    });
}

#[test]
fn a_stream_past_the_limit_closes_the_connection() {
    run(async {
        let (mut listener, address) = listener(Duration::from_secs(30)).await;
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(&parameters()).await.unwrap();
        let request = listener.accept().await.expect("a request");
        let _session = request.accept();
        // The fifth unidirectional stream of the client: index 4, past the limit of 4.
        let past = Frame::Stream {
            id: 4 << 2 | 2,
            offset: 0,
            data: Bytes::from_static(b"x"),
            fin: false,
        };
        stream.write_all(&record(&[past])).await.unwrap();
        assert_eq!(
            close_code(&mut stream).await,
            Some(0x04),
            "STREAM_LIMIT_ERROR"
        );
        still_serving(&mut listener, address).await;
    });
}

#[test]
fn a_silent_peer_is_given_up_at_the_idle_timeout() {
    run(async {
        let (mut listener, address) = listener(Duration::from_secs(1)).await;
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(&parameters()).await.unwrap();
        let session = listener.accept().await.expect("a request").accept();
        // The client answers nothing (not even the keep-alive QX_PINGs): the server ends
        // the connection on its own, without a CONNECTION_CLOSE (spec: -02 §7.2).
        assert_eq!(close_code(&mut stream).await, None);
        session.closed().await;
        let why = session.transport_closed().unwrap_or_default();
        assert!(why.contains("idle timeout"), "{why}");
        still_serving(&mut listener, address).await;
    });
}
