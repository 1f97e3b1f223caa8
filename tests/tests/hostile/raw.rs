//! What a hostile client writes by hand: a SETUP, announcements, answers to the relay's
//! subscriptions, group streams and frames.

use std::sync::{Arc, Mutex};

use moq_conformance::hostile::HostileClient;
use moq_conformance::strict::wire::{Announce, AnnounceOk, Lite};
use moqx_net::model::Origin;
use moqx_net::session::{Session, SessionConfig};
use moqx_tokio::{ClientConfig, connect};

use super::bed::{Bed, read_chat};

/// The minimal client SETUP on its uni stream: type 1, length 1, no parameters.
pub(crate) const SETUP: &[u8] = &[0x01, 0x01, 0x00];

/// A hostile publisher: announces `evil` (one track `chat`) and answers the relay's TRACK
/// and SUBSCRIBE; returns the subscription's id once the relay subscribed.
pub(crate) fn evil_publisher(client: &mut HostileClient) -> u64 {
    announce_one(client, SETUP, "evil");
    answer_subscription(client)
}

/// Sends `setup` (a whole SETUP stream) and announces `suffix` on the relay's announce
/// request.
pub(crate) fn announce_one(client: &mut HostileClient, setup: &[u8], suffix: &str) {
    let stream = client.open_uni();
    client.write(stream, setup, true);
    let announce = client
        .next_server_stream(1, &[])
        .expect("an ANNOUNCE_REQUEST");
    client.read(announce, 3);
    let mut answer = AnnounceOk {
        hop_id: 0,
        active_count: 1,
    }
    .encode();
    answer.extend(
        Announce {
            active: true,
            suffix: suffix.into(),
            hops: Vec::new(),
        }
        .encode(Lite::V05),
    );
    client.write(announce, &answer, false);
}

/// Answers the relay's TRACK and SUBSCRIBE for the one track; returns the subscription id.
pub(crate) fn answer_subscription(client: &mut HostileClient) -> u64 {
    // The relay's first bidi stream (id 1) is its announce request.
    let announce = 1;
    // TRACK: answered with TRACK_INFO (priority 0, unordered, 5 s, timescale 1000), FIN.
    let track = client
        .next_server_stream(1, &[announce])
        .expect("a TRACK request");
    client.read(track, 4);
    client.write(track, &[0x06, 0x00, 0x00, 0x53, 0x88, 0x43, 0xe8], true);
    // SUBSCRIBE: type 2, then its length and its id.
    let subscribe = client
        .next_server_stream(1, &[announce, track])
        .expect("a SUBSCRIBE");
    let request = client.read(subscribe, 4);
    assert_eq!(request.first(), Some(&0x02), "a subscribe stream");
    let mut body = &request[1..];
    let _length = moq_conformance::strict::wire::read_varint(&mut body).unwrap();
    moq_conformance::strict::wire::read_varint(&mut body).unwrap()
}

/// A group stream's opening: stream type 0, then GROUP (subscribe id, sequence).
pub(crate) fn group_header(subscribe: u64, sequence: u64) -> Vec<u8> {
    let mut body = Vec::new();
    moq_conformance::strict::wire::write_varint(&mut body, subscribe);
    moq_conformance::strict::wire::write_varint(&mut body, sequence);
    let mut header = vec![0x00];
    header.extend(moq_conformance::strict::wire::message(&body));
    header
}

/// One FRAME: timestamp delta 0, the payload's size, the payload.
pub(crate) fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0x00];
    moq_conformance::strict::wire::write_varint(&mut out, payload.len() as u64);
    out.extend_from_slice(payload);
    out
}

/// A good subscriber of the hostile publisher's `evil`/`chat`: its session and what it
/// received.
pub(crate) async fn evil_reader(bed: &Bed) -> (Session, Arc<Mutex<Vec<String>>>) {
    let seen = Origin::new();
    let subscriber = connect(
        &format!("moqt://localhost:{}/", bed.relay.port()),
        ClientConfig::default()
            .with_session(SessionConfig::default().with_subscriber(&seen))
            .with_fingerprint(bed.fingerprint),
    )
    .await
    .unwrap();
    let received = read_chat(&seen, "evil").await;
    (subscriber, received)
}
