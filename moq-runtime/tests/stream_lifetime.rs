//! The adapter keeps per-stream state exactly as long as the stream: 100,000 groups, one
//! uni stream each (the shape of chat, where every message is a group), go through one
//! connection, and afterwards the adapter's bookkeeping on both ends is back to what it
//! was once the session had settled. Raw QUIC and WebTransport.
//!
//! Regression: the adapter's stream map and its set of surfaced peer streams never lost
//! an entry, so a relay grew by about 0.5 KB per delivered message, forever, and its
//! per-packet walk over them grew with uptime.

mod common;

use common::chat::chat_subscription;
use common::webtransport::established;
use common::{BusyRuntime, connected_pair, run_until};
use moqx_runtime::binding::BindingSession;
use moqx_runtime::quic::{Bookkeeping, QuicConnection};

const GROUPS: u64 = 100_000;

/// Groups published before the idle size is read: enough for every control stream to
/// have settled.
const WARM_UP: u64 = 10;

/// Groups published per turn of the pump (the publisher runs ahead of the network; the
/// subscriber's stream credit paces it).
const BATCH: u64 = 50;

#[test]
fn a_hundred_thousand_groups_leave_no_stream_state_behind_on_raw_quic() {
    let runtime = BusyRuntime::default();
    let (client, server) = connected_pair(&runtime, "lifetime-quic", b"moq-lite-05");
    let server_transport = BindingSession::from(server.session());
    let client_transport = BindingSession::from(client.session());
    run_groups(
        &runtime,
        &client,
        &server,
        server_transport,
        client_transport,
    );
}

#[test]
fn a_hundred_thousand_groups_leave_no_stream_state_behind_on_webtransport() {
    let runtime = BusyRuntime::default();
    let (client, server, client_session, server_session) =
        established(&runtime, "lifetime-webtransport");
    run_groups(
        &runtime,
        &client,
        &server,
        BindingSession::from(server_session),
        BindingSession::from(client_session),
    );
}

/// The server publishes a chat-shaped track (one frame per group), the client subscribes;
/// [`GROUPS`] groups go through; both ends' bookkeeping must match what it was after
/// [`WARM_UP`] groups.
fn run_groups(
    runtime: &BusyRuntime,
    client: &QuicConnection,
    server: &QuicConnection,
    server_transport: BindingSession,
    client_transport: BindingSession,
) {
    let mut chat = chat_subscription(runtime, client, server, server_transport, client_transport);

    chat.publish(runtime, client, server, WARM_UP, BATCH);
    // A stream that ends with a FIN of its own keeps its entries until that FIN is
    // written, once its bytes are acknowledged (the adapter holds it: `quic/fins.rs`),
    // and read: the idle size is taken once no FIN is held and a few turns went by.
    assert!(
        run_until(runtime, client, server, || {
            server.status().held_fin_at.is_none() && client.status().held_fin_at.is_none()
        }),
        "the held FINs are written"
    );
    let mut turns = 0;
    run_until(runtime, client, server, || {
        turns += 1;
        turns > 10
    });
    let idle = (server.bookkeeping(), client.bookkeeping());
    assert!(
        idle.0.streams <= 8 && idle.1.streams <= 8,
        "a settled session keeps a handful of control streams: {idle:?}"
    );

    chat.publish(runtime, client, server, GROUPS, BATCH);
    let after = (server.bookkeeping(), client.bookkeeping());
    // The finished streams noted for parking are pruned as the list doubles: bounded by
    // the streams in flight at a prune, never by the groups that went through.
    for side in [&after.0, &after.1] {
        assert!(
            side.finished_streams <= 2 * BATCH as usize + 64,
            "finished streams kept after {GROUPS} groups: {after:?}"
        );
    }
    let settled = |side: Bookkeeping| Bookkeeping {
        finished_streams: 0,
        ..side
    };
    let (after, idle) = (
        (settled(after.0), settled(after.1)),
        (settled(idle.0), settled(idle.1)),
    );
    assert_eq!(
        after, idle,
        "after {GROUPS} groups the bookkeeping (server, client) is back to its idle size"
    );
    assert_eq!(after.0.parked_writers, 0);
    assert_eq!(
        after.1,
        Bookkeeping {
            streams: idle.1.streams,
            ..Bookkeeping::default()
        }
    );
}
