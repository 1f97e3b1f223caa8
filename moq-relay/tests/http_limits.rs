//! The relay's HTTP side under clients that hold connections: a connection cap, a
//! header-read timeout, and a lifetime per connection, over real TCP on loopback.
//!
//! Regression: axum's `serve` set none of them, so clients that connected and sent nothing
//! (or sent headers a byte at a time) held sockets forever.
#![allow(missing_docs)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use moqx_relay::{Config, Relay};

/// A bound on every wait, so that a broken relay fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(30);

/// A relay on loopback with HTTP on its own port, running until the test ends.
async fn relay(edit: impl FnOnce(&mut Config)) -> SocketAddr {
    let mut config = Config::default();
    config.server.bind = "127.0.0.1:0".parse().unwrap();
    config.http.bind = Some("127.0.0.1:0".parse().unwrap());
    edit(&mut config);
    let relay = Relay::bind(&config).await.unwrap();
    let http = relay.http_addr().unwrap();
    tokio::spawn(relay.run(std::future::pending()));
    http
}

/// Reads until the server closes the connection (or `PATIENCE` runs out); returns what it
/// sent and whether it closed.
fn read_to_close(stream: &mut TcpStream) -> (String, bool) {
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&text).into_owned(), true),
            Ok(n) => text.extend_from_slice(&buf[..n]),
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {
                return (String::from_utf8_lossy(&text).into_owned(), true);
            }
            Err(_) => return (String::from_utf8_lossy(&text).into_owned(), false),
        }
    }
}

fn get_metrics(stream: &mut TcpStream) {
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_are_closed_unanswered_and_the_held_ones_serve() {
    // A header timeout far beyond the test, so that only the cap can close anything.
    let http = relay(|config| {
        config.http.max_connections = 2;
        config.http.header_read_timeout_secs = 3600;
        config.http.connection_lifetime_secs = 3600;
    })
    .await;
    tokio::task::spawn_blocking(move || {
        let mut held: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(http).unwrap()).collect();
        // Both held connections are accepted before the third (one accept loop, in order):
        // a request on each proves it.
        for stream in &mut held {
            stream
                .write_all(b"GET /certificate.sha256 HTTP/1.1\r\nHost: r\r\n\r\n")
                .unwrap();
            stream.set_read_timeout(Some(PATIENCE)).unwrap();
            let mut buf = [0u8; 1024];
            let n = stream.read(&mut buf).unwrap();
            assert!(
                buf[..n].starts_with(b"HTTP/1.1 200"),
                "kept alive and answered"
            );
        }
        let mut third = TcpStream::connect(http).unwrap();
        get_metrics(&mut third);
        let (answer, closed) = read_to_close(&mut third);
        assert!(
            closed && answer.is_empty(),
            "over the cap: closed, unanswered: {answer:?}"
        );

        // A held one leaves; a new connection is served.
        drop(held.pop());
        let served = (0..100).any(|_| {
            let mut stream = TcpStream::connect(http).unwrap();
            get_metrics(&mut stream);
            let (answer, _) = read_to_close(&mut stream);
            if answer.starts_with("HTTP/1.1 200") {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50)); // the slot frees as its task ends
            false
        });
        assert!(served, "a freed slot serves a new connection");
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_sends_no_headers_or_stays_too_long_is_closed() {
    let http = relay(|config| {
        config.http.header_read_timeout_secs = 1;
        config.http.connection_lifetime_secs = 2;
    })
    .await;
    tokio::task::spawn_blocking(move || {
        // Connects and sends nothing.
        let mut silent = TcpStream::connect(http).unwrap();
        let (_, closed) = read_to_close(&mut silent);
        assert!(closed, "closed for sending no headers");

        // Sends half a header line and nothing more.
        let mut slow = TcpStream::connect(http).unwrap();
        slow.write_all(b"GET /metrics HTTP/1.1\r\nHo").unwrap();
        let (_, closed) = read_to_close(&mut slow);
        assert!(closed, "closed for not finishing its headers");

        // Keeps a connection alive with a request now and then: closed at its lifetime.
        let mut lingering = TcpStream::connect(http).unwrap();
        lingering.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut closed = false;
        for _ in 0..(PATIENCE.as_millis() / 500) {
            let request = b"GET /certificate.sha256 HTTP/1.1\r\nHost: r\r\n\r\n";
            if lingering.write_all(request).is_err() {
                closed = true;
                break;
            }
            let mut buf = [0u8; 1024];
            match lingering.read(&mut buf) {
                Ok(0) | Err(_) => {
                    closed = true;
                    break;
                }
                Ok(_) => std::thread::sleep(Duration::from_millis(500)),
            }
        }
        assert!(closed, "closed at the end of its lifetime");

        // And the server still answers.
        let mut stream = TcpStream::connect(http).unwrap();
        get_metrics(&mut stream);
        let (answer, _) = read_to_close(&mut stream);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    })
    .await
    .unwrap();
}

/// Review finding F12: one client holding every connection locked everyone out of
/// `/metrics` and `/certificate.sha256` (which the browser page fetches before it
/// connects). Past its per-address cap one address is refused, and a client on another
/// address is still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_take_every_connection() {
    let http = relay(|config| {
        config.http.max_connections = 8;
        config.http.max_connections_per_address = 4;
        config.http.header_read_timeout_secs = 3600;
        config.http.connection_lifetime_secs = 3600;
    })
    .await;
    tokio::task::spawn_blocking(move || {
        // 127.0.0.1 tries to hold all eight; four are kept (each answers a request).
        let mut held = Vec::new();
        for _ in 0..8 {
            let mut stream = TcpStream::connect(http).unwrap();
            stream
                .write_all(b"GET /certificate.sha256 HTTP/1.1\r\nHost: r\r\n\r\n")
                .unwrap();
            stream.set_read_timeout(Some(PATIENCE)).unwrap();
            let mut buf = [0u8; 1024];
            let answered =
                matches!(stream.read(&mut buf), Ok(n) if buf[..n].starts_with(b"HTTP/1.1 200"));
            if answered {
                held.push(stream);
            }
        }
        assert_eq!(held.len(), 4, "one address holds its cap, no more");
        // Another loopback address (all of 127/8 is local) is served.
        let other =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        other
            .bind(&SocketAddr::from(([127, 0, 0, 2], 0)).into())
            .unwrap();
        other.connect(&http.into()).unwrap();
        let mut other: TcpStream = other.into();
        get_metrics(&mut other);
        let (answer, _) = read_to_close(&mut other);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    })
    .await
    .unwrap();
}
