//! A client and a server connection joined in memory: records out of one go straight into
//! the other, and time moves only when a test moves it.

use std::task::{Poll, Waker};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use moqx_kio::Waiter;
use moqx_net::runtime::Instant;
use moqx_net::transport::{StreamError, StreamPriority, TransportError};

use super::{Config, Connection, Side};
use crate::frame::Frame;
use crate::version::Version;

struct Pair {
    client: Connection,
    server: Connection,
    now: Instant,
    waiter: Waiter,
}

impl Pair {
    fn new(config: Config) -> Self {
        Self::with_version(config, Version::Draft01)
    }

    fn with_version(config: Config, version: Version) -> Self {
        let now = Instant::now();
        let mut pair = Self {
            client: Connection::new(Side::Client, version, config.clone(), vec![], now),
            server: Connection::new(Side::Server, version, config, vec![], now),
            now,
            waiter: Waiter::new(Waker::noop()),
        };
        pair.pump();
        pair
    }

    /// Moves records both ways until neither side has any.
    fn pump(&mut self) {
        loop {
            let mut moved = false;
            while let Some(record) = self.client.poll_transmit() {
                self.server.handle_record(record, self.now);
                moved = true;
            }
            while let Some(record) = self.server.poll_transmit() {
                self.client.handle_record(record, self.now);
                moved = true;
            }
            if !moved {
                return;
            }
        }
    }

    fn open_uni(&mut self) -> u64 {
        ready(self.client.poll_open(true, &self.waiter)).expect("opens")
    }

    fn write(&mut self, id: u64, data: &[u8], fin: bool) -> Poll<Result<(), StreamError>> {
        let mut data = Bytes::copy_from_slice(data);
        self.client.poll_write(id, &self.waiter, &mut data, fin)
    }

    /// Everything the server can read of `id` now, and whether it reached the end.
    fn read_all(&mut self, id: u64) -> (Vec<u8>, Option<Result<(), StreamError>>) {
        let mut bytes = Vec::new();
        loop {
            match self.server.poll_read(id, &self.waiter) {
                Poll::Ready(Ok(Some(chunk))) => bytes.extend_from_slice(&chunk),
                Poll::Ready(Ok(None)) => return (bytes, Some(Ok(()))),
                Poll::Ready(Err(error)) => return (bytes, Some(Err(error))),
                Poll::Pending => return (bytes, None),
            }
        }
    }
}

fn ready<T>(poll: Poll<T>) -> T {
    match poll {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("pending"),
    }
}

fn frames(frames: &[Frame]) -> Bytes {
    let mut buf = BytesMut::new();
    for frame in frames {
        frame.encode(&mut buf);
    }
    buf.freeze()
}

#[test]
fn a_stream_arrives_whole_with_its_end() {
    let mut pair = Pair::new(Config::default());
    let id = pair.open_uni();
    assert_eq!(id, 2, "the client's first unidirectional stream");
    assert!(ready(pair.write(id, b"hello ", false)).is_ok());
    assert!(ready(pair.write(id, b"world", true)).is_ok());
    pair.pump();
    let accepted = ready(pair.server.poll_accept(true, &pair.waiter)).unwrap();
    assert_eq!(accepted, id);
    assert_eq!(pair.read_all(id), (b"hello world".to_vec(), Some(Ok(()))));
    pair.client.release_send(id);
    pair.server.release_recv(id);
    assert_eq!(
        pair.client.stream_count(),
        0,
        "the sender forgot the stream"
    );
    assert_eq!(
        pair.server.stream_count(),
        0,
        "the receiver forgot the stream"
    );
}

#[test]
fn every_draft_carries_a_stream() {
    for version in Version::ALL {
        let mut pair = Pair::with_version(Config::default(), version);
        let id = pair.open_uni();
        let payload = vec![7u8; 100_000];
        let mut data = Bytes::from(payload.clone());
        assert!(ready(pair.client.poll_write(id, &pair.waiter, &mut data, true)).is_ok());
        pair.pump();
        assert_eq!(pair.read_all(id), (payload, Some(Ok(()))), "{version}");
    }
}

#[test]
fn a_writer_waits_for_the_readers_credit() {
    let config = Config {
        stream_window: 1_000,
        ..Config::default()
    };
    let mut pair = Pair::new(config);
    let id = pair.open_uni();
    let mut data = Bytes::from(vec![1u8; 2_500]);
    assert!(
        pair.client
            .poll_write(id, &pair.waiter, &mut data, true)
            .is_pending()
    );
    assert_eq!(data.len(), 1_500, "the stream's credit took 1,000 bytes");
    pair.pump();
    let (read, end) = pair.read_all(id);
    assert_eq!((read.len(), end), (1_000, None));
    // Reading half the window gave the writer more credit.
    pair.pump();
    assert!(
        pair.client
            .poll_write(id, &pair.waiter, &mut data, true)
            .is_pending()
    );
    assert_eq!(data.len(), 500);
    pair.pump();
    let (read, _) = pair.read_all(id);
    assert_eq!(read.len(), 1_000);
    pair.pump();
    assert!(ready(pair.client.poll_write(id, &pair.waiter, &mut data, true)).is_ok());
    pair.pump();
    assert_eq!(pair.read_all(id), (vec![1u8; 500], Some(Ok(()))));
}

#[test]
fn the_more_urgent_stream_goes_first() {
    let mut pair = Pair::new(Config::default());
    let old = pair.open_uni();
    let new = pair.open_uni();
    pair.client.set_priority(
        old,
        StreamPriority {
            subscriber: 0,
            group: 1,
        },
    );
    pair.client.set_priority(
        new,
        StreamPriority {
            subscriber: 0,
            group: 2,
        },
    );
    assert!(ready(pair.write(old, &[1u8; 40_000], true)).is_ok());
    assert!(ready(pair.write(new, &[2u8; 40_000], true)).is_ok());
    // The first record with stream data holds the newer group's.
    let record = pair.client.poll_transmit().unwrap();
    let mut record = record;
    let first = loop {
        match Frame::decode(&mut record, crate::frame::Lengthless::RunsToEnd).unwrap() {
            Frame::Stream { id, .. } => break id,
            _ => continue,
        }
    };
    assert_eq!(first, new);
}

#[test]
fn resets_and_stops_carry_their_codes() {
    let mut pair = Pair::new(Config::default());
    let id = pair.open_uni();
    assert!(ready(pair.write(id, b"part", false)).is_ok());
    pair.pump();
    pair.client.reset(id, 7);
    pair.pump();
    assert_eq!(pair.read_all(id).1, Some(Err(StreamError::Reset(7))));

    let id = pair.open_uni();
    assert!(ready(pair.write(id, b"part", false)).is_ok());
    pair.pump();
    pair.server.stop(id, 9);
    pair.pump();
    assert_eq!(ready(pair.client.poll_stopped(id, &pair.waiter)), Ok(9));
    assert_eq!(
        ready(pair.write(id, b"more", false)),
        Err(StreamError::Stopped(9))
    );
}

#[test]
fn a_close_reaches_the_peer_with_its_code_and_reason() {
    let mut pair = Pair::new(Config::default());
    pair.client.close(0x10, "going away");
    pair.pump();
    assert_eq!(
        ready(pair.server.poll_closed(&pair.waiter)),
        TransportError::Closed {
            code: 0x10,
            reason: "going away".into(),
            remote: true
        }
    );
    assert!(
        pair.client.poll_transmit().is_none(),
        "nothing after the close"
    );
}

#[test]
fn a_quiet_peer_is_pinged_and_a_silent_one_given_up() {
    let mut pair = Pair::new(Config::default());
    let start = pair.now;
    // 5 s of quiet: each side asks; each answers; both stay up.
    pair.now = start + Duration::from_secs(5);
    pair.client.on_timeout(pair.now);
    pair.server.on_timeout(pair.now);
    pair.pump();
    assert!(pair.client.closed().is_none() && pair.server.closed().is_none());
    assert!(
        pair.client.stats().rtt.is_some(),
        "the answer measured a round trip"
    );
    // Now the server goes silent: the client pings, hears nothing, and gives up at 30 s.
    let heard = pair.now;
    while pair.client.closed().is_none() {
        let at = pair.client.timeout().expect("a timer while open");
        pair.now = at;
        pair.client.on_timeout(at);
        while pair.client.poll_transmit().is_some() {}
    }
    assert_eq!(pair.now, heard + Duration::from_secs(30));
    assert!(matches!(
        pair.client.closed(),
        Some(TransportError::Lost(_))
    ));
}

#[test]
fn streams_are_forgotten_and_the_peer_gets_more() {
    let config = Config {
        max_streams: 4,
        ..Config::default()
    };
    let mut pair = Pair::new(config);
    for round in 0..20 {
        let id = pair.open_uni();
        assert!(
            ready(pair.write(id, b"message", true)).is_ok(),
            "round {round}"
        );
        pair.client.release_send(id);
        pair.pump();
        let accepted = ready(pair.server.poll_accept(true, &pair.waiter)).unwrap();
        assert_eq!(pair.read_all(accepted).1, Some(Ok(())));
        pair.server.release_recv(accepted);
        pair.pump();
    }
    assert_eq!(pair.client.stream_count() + pair.server.stream_count(), 0);
}

#[test]
fn an_opener_waits_at_the_peers_stream_limit() {
    let config = Config {
        max_streams: 2,
        ..Config::default()
    };
    let mut pair = Pair::new(config);
    pair.open_uni();
    pair.open_uni();
    assert!(pair.client.poll_open(true, &pair.waiter).is_pending());
}

/// A peer that breaks the rules: the server connection takes `records` as the client's
/// and the test reads the close it sends.
fn hostile(records: &[Bytes]) -> (TransportError, Frame) {
    let now = Instant::now();
    let config = Config {
        stream_window: 100,
        max_streams: 2,
        ..Config::default()
    };
    let mut server = Connection::new(Side::Server, Version::Draft01, config, vec![], now);
    for record in records {
        server.handle_record(record.clone(), now);
    }
    let error = server.closed().cloned().expect("the server closed");
    let mut close = None;
    while let Some(mut record) = server.poll_transmit() {
        while !record.is_empty() {
            if let Ok(frame @ Frame::ConnectionClose { .. }) =
                Frame::decode(&mut record, crate::frame::Lengthless::RunsToEnd)
            {
                close = Some(frame);
            }
        }
    }
    (error, close.expect("a CONNECTION_CLOSE"))
}

fn close_code(frame: &Frame) -> u64 {
    match frame {
        Frame::ConnectionClose { code, .. } => *code,
        _ => unreachable!(),
    }
}

fn parameters() -> Frame {
    Frame::TransportParameters(crate::params::TransportParameters::default().encode(true))
}

#[test]
fn hostile_peers_are_closed_with_the_code_the_draft_names() {
    let stream = |id: u64, offset: u64, len: usize| Frame::Stream {
        id,
        offset,
        data: Bytes::from(vec![0u8; len]),
        fin: false,
    };
    let cases: Vec<(&str, Vec<Bytes>, u64)> = vec![
        (
            "a first frame that is not the parameters",
            vec![frames(&[Frame::MaxData(5)])],
            0x08,
        ),
        (
            "the parameters twice",
            vec![frames(&[parameters(), parameters()])],
            0x08,
        ),
        (
            "a stream past the limit",
            vec![frames(&[parameters(), stream(2 + 4 * 2, 0, 1)])],
            0x04,
        ),
        (
            "data past the stream's credit",
            vec![frames(&[parameters(), stream(2, 0, 101)])],
            0x03,
        ),
        (
            "data out of order",
            vec![frames(&[parameters(), stream(2, 5, 1)])],
            0x0a,
        ),
        (
            "a record over the limit",
            vec![Bytes::from(vec![0u8; 70_000])],
            0x07,
        ),
        (
            "a prohibited frame (ACK)",
            vec![
                frames(&[parameters()]),
                Bytes::from_static(&[0x02, 0, 0, 0, 0]),
            ],
            0x07,
        ),
        (
            "a datagram never offered",
            vec![frames(&[parameters()]), Bytes::from_static(&[0x31, 1])],
            0x0a,
        ),
        (
            "a server's stream sent by the client",
            vec![frames(&[parameters(), stream(3, 0, 1)])],
            0x05,
        ),
        (
            "an answer to a ping never sent",
            vec![frames(&[parameters(), Frame::PingResponse(3)])],
            0x0a,
        ),
    ];
    for (case, records, code) in cases {
        let (error, close) = hostile(&records);
        assert_eq!(close_code(&close), code, "{case}: {error}");
        assert!(matches!(error, TransportError::Lost(_)), "{case}");
    }
}
