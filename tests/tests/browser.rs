//! The chat page (`moqx-wasm` in the browser) in a real headless Chromium, against the
//! relay over real WebTransport on loopback, with the `moqx` CLI as the native peer:
//!
//! 1. the page publishes, `moqx subscribe` receives every message;
//! 2. `moqx publish` publishes, the page receives every message;
//! 3. two pages chat through the relay;
//! 4. a page with a wrong certificate fingerprint fails with a clear error, and the relay
//!    goes on serving;
//! 5. the page after a chat shows what a person should see, and its screenshot is saved
//!    (`target/browser/chat.png`);
//! 6. a relay shutting down (SIGTERM) tells the page first: `Connection.goingAway()`
//!    resolves before the session ends;
//! 7. a page without WebTransport (as on Safari) chats over a WebSocket (QMux) with a page
//!    over WebTransport and with `moqx subscribe` over raw QUIC, and says what it got;
//! 8. a page whose relay's UDP port is unreachable falls back to the WebSocket;
//! 9. a page that reconnects (`reconnect: true`) carries on after its relay restarts:
//!    it hears `moqx publish` again, and `moqx subscribe` hears it, on the new relay.
//!
//! Run by `cargo xtask browser` (part of `cargo xtask test`), which installs Chromium,
//! builds the page and sets `MOQ_WEB_ROOT`. The tests run one at a time: each starts
//! Chromium processes of its own, and a 2-core machine runs one such test well.
//!
//! Every message is awaited, never timed. A subscriber only gets the messages sent after
//! its subscription is up (each message is a group; a late joiner starts at the latest),
//! so each test first sends warm-up messages until the receiver has one, then the
//! numbered messages it checks, all of which must arrive. The page shows each sender's
//! messages in their order (by group sequence, as moq-lite may deliver a burst newest
//! first), and the tests check that order.
#![allow(missing_docs, clippy::print_stderr)]

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

use moq_conformance::browser::{
    Chromium, Lines, PATIENCE, Page, Relay, RelayOptions, messages_from, web_root, workspace_binary,
};
use serde_json::Value;

/// Messages each test checks.
const MESSAGES: usize = 20;

/// One browser test at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

fn relay() -> Relay {
    let binary = workspace_binary("moqx-relay", "moqx-relay", false, false);
    Relay::start(&binary, &web_root())
}

fn moq(relay: &Relay, args: &[&str]) -> Command {
    let mut command = Command::new(workspace_binary("moqx-cli", "moqx", false, false));
    command
        .arg(args[0])
        .args(["--fingerprint", relay.fingerprint()])
        .args(&args[1..])
        .env("RUST_LOG", "warn");
    command
}

fn numbered(prefix: &str) -> Vec<String> {
    (0..MESSAGES).map(|i| format!("{prefix} {i}")).collect()
}

/// The number at the end of a numbered message.
fn number(text: &str) -> usize {
    text.rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
}

/// The numbered messages in `received`, in the order received.
fn only_numbered(received: &[String], prefix: &str) -> Vec<String> {
    received
        .iter()
        .filter(|text| text.starts_with(prefix))
        .cloned()
        .collect()
}

/// `moqx subscribe` to alice's chat track in `room`, once the page (alice) has warmed it
/// up: the page sends warm-up messages until the subscriber has printed one, so its
/// subscription is up. The process and its output.
async fn subscribe_to_page(relay: &Relay, page: &Page, room: &str) -> (Child, Lines) {
    let mut subscriber = moq(
        relay,
        &[
            "subscribe",
            &relay.moqt_url(room),
            "alice",
            "--track",
            "chat",
        ],
    )
    .stdout(Stdio::piped())
    .spawn()
    .expect("moqx subscribe runs");
    let mut lines = Lines::of(subscriber.stdout.take().unwrap());
    let deadline = Instant::now() + PATIENCE;
    let mut warmups = 0;
    while lines.seen().is_empty() {
        assert!(Instant::now() < deadline, "moqx subscribe received nothing");
        page.send(&format!("warm-up {warmups}")).await;
        warmups += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (subscriber, lines)
}

/// Writes to `moqx publish` (its stdin) as `from`: warm-up lines until the page hears one
/// more message from it than it had (its subscription is up), then the numbered messages
/// `prefix 0..`, every one of which the page must show, in order.
async fn publish_to_page(
    page: &Page,
    stdin: &mut std::process::ChildStdin,
    from: &str,
    prefix: &str,
) {
    let heard = page.received_from(from).await.len();
    let deadline = Instant::now() + PATIENCE;
    let mut warmups = 0;
    while page.received_from(from).await.len() == heard {
        assert!(
            Instant::now() < deadline,
            "the page heard nothing from {from}"
        );
        writeln!(stdin, "warm-up {warmups}").unwrap();
        stdin.flush().unwrap();
        warmups += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let expected = numbered(prefix);
    for text in &expected {
        writeln!(stdin, "{text}").unwrap();
    }
    stdin.flush().unwrap();
    let state = page
        .wait_until(&format!("every message from {from}"), |state| {
            only_numbered(&messages_from(state, from), prefix).len() >= MESSAGES
        })
        .await;
    assert_eq!(
        only_numbered(&messages_from(&state, from), prefix),
        expected
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_publishes_and_moq_subscribe_receives_every_message() {
    let _one = ONE_AT_A_TIME.lock().await;
    let relay = relay();
    let chromium = Chromium::start();
    let page = chromium
        .open(&relay.page_url("name=alice&room=native-sub&autojoin=1"))
        .await;
    page.wait_connected().await;

    page_to_moq_subscribe(&relay, &page, "native-sub").await;
    page.close().await;
}

/// The page (alice, joined to `room`) sends the numbered messages, and `moqx subscribe`
/// prints every one of them.
async fn page_to_moq_subscribe(relay: &Relay, page: &Page, room: &str) {
    let (mut subscriber, mut lines) = subscribe_to_page(relay, page, room).await;
    let deadline = Instant::now() + PATIENCE;
    let expected = numbered("from the page");
    for text in &expected {
        page.send(text).await;
    }
    while only_numbered(lines.seen(), "from the page").len() < MESSAGES {
        assert!(
            Instant::now() < deadline,
            "moqx subscribe printed only {:?}",
            lines.seen()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // `moqx subscribe` prints in arrival order, and moq-lite may deliver a burst newest
    // first; every message must be there, once.
    let mut received = only_numbered(lines.seen(), "from the page");
    received.sort_by_key(|text| number(text));
    assert_eq!(received, expected);
    let _ = subscriber.kill();
    let _ = subscriber.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moq_publish_publishes_and_the_page_receives_every_message() {
    let _one = ONE_AT_A_TIME.lock().await;
    let relay = relay();
    let chromium = Chromium::start();
    let page = chromium
        .open(&relay.page_url("name=bob&room=native-pub&autojoin=1"))
        .await;
    page.wait_connected().await;
    moq_publish_to_page(&relay, &page, "native-pub").await;
    page.close().await;
}

/// `moqx publish` as carol in `room`, and the page joined there shows every numbered
/// message it sends.
async fn moq_publish_to_page(relay: &Relay, page: &Page, room: &str) {
    let mut publisher = moq(
        relay,
        &[
            "publish",
            &relay.moqt_url(room),
            "carol",
            "--track",
            "chat",
            "--group-size",
            "1",
        ],
    )
    .stdin(Stdio::piped())
    .spawn()
    .expect("moqx publish runs");
    let mut stdin = publisher.stdin.take().unwrap();
    page.wait_until("the page to see carol", |state| {
        state["people"]
            .as_array()
            .is_some_and(|people| people.iter().any(|p| p == "carol"))
    })
    .await;
    publish_to_page(page, &mut stdin, "carol", "from moqx publish").await;
    drop(stdin);
    let _ = publisher.kill();
    let _ = publisher.wait();
}

/// A page speaking IETF moq-transport (draft 18, over WebTransport) and native moq-lite
/// clients in one room: the relay translates both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_moq_transport_chats_with_native_moq_lite_clients() {
    let _one = ONE_AT_A_TIME.lock().await;
    let relay = relay();
    let chromium = Chromium::start();
    let page =
        chromium
            .open(&relay.page_url(
                "name=alice&room=moqt&autojoin=1&transport=webtransport&versions=moqt-18",
            ))
            .await;
    let state = page.wait_connected().await;
    assert_eq!(state["version"], "moqt-18", "{state:#}");

    page_to_moq_subscribe(&relay, &page, "moqt").await;
    moq_publish_to_page(&relay, &page, "moqt").await;
    page.close().await;
}

/// Two pages, alice and bob, joined to `room` and hearing each other.
async fn two_pages(relay: &Relay, chromium: &Chromium, room: &str) -> (Page, Page) {
    two_pages_with(relay, chromium, room, "", "").await
}

/// [`two_pages`], with more query parameters for alice's page and bob's.
async fn two_pages_with(
    relay: &Relay,
    chromium: &Chromium,
    room: &str,
    alice_query: &str,
    bob_query: &str,
) -> (Page, Page) {
    let alice = chromium
        .open(&relay.page_url(&format!("name=alice&room={room}&autojoin=1{alice_query}")))
        .await;
    let bob = chromium
        .open(&relay.page_url(&format!("name=bob&room={room}&autojoin=1{bob_query}")))
        .await;
    alice.wait_connected().await;
    bob.wait_connected().await;
    for (page, other) in [(&alice, "bob"), (&bob, "alice")] {
        page.wait_until(&format!("the page to see {other}"), |state| {
            state["people"]
                .as_array()
                .is_some_and(|people| people.iter().any(|p| p == other))
        })
        .await;
    }
    // Each warms up until the other has heard it.
    let deadline = Instant::now() + PATIENCE;
    let mut warmups = 0;
    while alice.received_from("bob").await.is_empty() || bob.received_from("alice").await.is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the pages did not hear each other"
        );
        alice.send(&format!("hi bob ({warmups})")).await;
        bob.send(&format!("hi alice ({warmups})")).await;
        warmups += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (alice, bob)
}

/// Alice and bob each send `count` numbered messages, alternating; waits until each page
/// has all of the other's, and checks them, in order. The state of alice's page.
async fn exchange(alice: &Page, bob: &Page, count: usize) -> Value {
    let from_alice: Vec<String> = numbered("alice says").into_iter().take(count).collect();
    let from_bob: Vec<String> = numbered("bob says").into_iter().take(count).collect();
    for (a, b) in from_alice.iter().zip(&from_bob) {
        alice.send(a).await;
        bob.send(b).await;
    }
    let state = bob
        .wait_until("every message from alice", |state| {
            only_numbered(&messages_from(state, "alice"), "alice says").len() >= count
        })
        .await;
    assert_eq!(
        only_numbered(&messages_from(&state, "alice"), "alice says"),
        from_alice
    );
    let state = alice
        .wait_until("every message from bob", |state| {
            only_numbered(&messages_from(state, "bob"), "bob says").len() >= count
        })
        .await;
    assert_eq!(
        only_numbered(&messages_from(&state, "bob"), "bob says"),
        from_bob
    );
    state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pages_chat_through_the_relay() {
    let _one = ONE_AT_A_TIME.lock().await;
    let relay = relay();
    let chromium = Chromium::start();
    let (alice, bob) = two_pages(&relay, &chromium, "pages").await;
    let state = exchange(&alice, &bob, MESSAGES).await;
    // Each message a page received carries its latency: the page gives one only to a
    // message whose send time is plausible on its clock (0 to 60 s ago), so a missing one
    // means a wrong or missing timestamp.
    let received = state["received"].as_array().unwrap();
    let latencies: Vec<f64> = received
        .iter()
        .filter_map(|message| message["latencyMs"].as_f64())
        .collect();
    assert_eq!(
        latencies.len(),
        received.len(),
        "every message has a latency: {state:#}"
    );
    alice.close().await;
    bob.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_after_a_chat_is_screenshotted() {
    let _one = ONE_AT_A_TIME.lock().await;
    let relay = relay();
    let chromium = Chromium::start();
    let (alice, bob) = two_pages(&relay, &chromium, "lobby").await;
    exchange(&alice, &bob, 6).await;

    // What a person sees: the room, both people, the messages with their latency.
    let visible = |id: &str| format!("document.getElementById('{id}').offsetParent !== null");
    assert_eq!(
        alice.eval(&visible("join")).await,
        false,
        "the join form is hidden"
    );
    assert_eq!(
        alice.eval(&visible("messages")).await,
        true,
        "the messages show"
    );
    let text = alice.eval("document.body.innerText").await;
    let text = text.as_str().unwrap_or_default();
    for shown in [
        "Connected to",
        "(moq-lite-05 over webtransport)",
        "bob says 5",
        "alice says 5",
        " ms",
    ] {
        assert!(text.contains(shown), "the page shows {shown:?}: {text}");
    }
    let people = alice
        .eval("[...document.querySelectorAll('#people li')].map((li) => li.textContent)")
        .await;
    assert_eq!(people, serde_json::json!(["alice", "bob"]));

    let png = alice.screenshot().await;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    let dir = web_root()
        .parent()
        .expect("the page is built in the target directory")
        .join("browser");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("chat.png");
    std::fs::write(&path, &png).unwrap();
    eprintln!("the page's screenshot: {}", path.display());
    alice.close().await;
    bob.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_fingerprint_fails_on_the_page_and_the_relay_keeps_serving() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut relay = relay();
    let chromium = Chromium::start();
    let wrong = "00".repeat(32);
    // WebTransport alone: a pinned fingerprint is WebTransport's (the page's WebSocket
    // fallback to a relay serving it over http is plain `ws://`, which has no
    // certificate to check).
    let page = chromium
        .open(&relay.page_url(&format!(
            "name=mallory&room=pinned&autojoin=1&transport=webtransport&fingerprint={wrong}"
        )))
        .await;
    let state = page
        .wait_until("the page to fail", |state| state["status"] == "failed")
        .await;
    let error = state["error"].as_str().unwrap_or_default();
    assert!(error.contains("Could not join"), "{error}");
    assert!(
        error.contains("could not connect to https://127.0.0.1:"),
        "{error}"
    );
    assert!(
        error.contains("fingerprint"),
        "the error names the likely cause: {error}"
    );
    assert!(
        error.contains("(code 4)"),
        "the error carries the wire code: {error}"
    );
    let shown = page
        .eval("document.getElementById('error').textContent")
        .await;
    assert_eq!(shown.as_str(), Some(error), "the page shows it");
    page.close().await;

    // The relay is still up and serving: a page with its real fingerprint joins, and a
    // native client round trips through it.
    assert!(relay.is_running(), "the relay is still running");
    let page = chromium
        .open(&relay.page_url("name=alice&room=pinned&autojoin=1"))
        .await;
    page.wait_connected().await;
    let (mut subscriber, mut lines) = subscribe_to_page(&relay, &page, "pinned").await;
    assert!(lines.seen()[0].starts_with("warm-up"), "{:?}", lines.seen());
    let _ = subscriber.kill();
    let _ = subscriber.wait();
    page.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_shutting_down_tells_the_page_before_the_session_ends() {
    let _one = ONE_AT_A_TIME.lock().await;
    let relay = relay();
    let chromium = Chromium::start();
    let page = chromium
        .open(&relay.page_url("name=alice&room=drain&autojoin=1"))
        .await;
    page.wait_connected().await;
    relay.terminate();
    let state = page
        .wait_until("the page to hear the relay go away", |state| {
            !state["goingAway"].is_null()
        })
        .await;
    // The page records it only while connected: it was heard before the session ended.
    assert_eq!(state["goingAway"], "", "GOAWAY to the same place, later");
    page.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_without_webtransport_chats_over_a_websocket_with_every_other_client() {
    let _one = ONE_AT_A_TIME.lock().await;
    let relay = relay();
    let chromium = Chromium::start();
    // Alice's browser has no WebTransport (deleted before the module loads); bob's has.
    let (alice, bob) = two_pages_with(&relay, &chromium, "mixed", "&no-webtransport=1", "").await;
    let (alice_state, bob_state) = (alice.chat().await, bob.chat().await);
    assert_eq!(alice_state["transport"], "websocket", "{alice_state:#}");
    assert_eq!(bob_state["transport"], "webtransport", "{bob_state:#}");
    for state in [&alice_state, &bob_state] {
        assert_eq!(
            state["version"], "moq-lite-05",
            "the negotiated version: {state:#}"
        );
    }
    exchange(&alice, &bob, 10).await;

    // `moqx subscribe` over raw QUIC hears alice's page over its WebSocket.
    let (mut subscriber, mut lines) = subscribe_to_page(&relay, &alice, "mixed").await;
    let expected: Vec<String> = numbered("over a websocket").into_iter().take(10).collect();
    for text in &expected {
        alice.send(text).await;
    }
    let deadline = Instant::now() + PATIENCE;
    while only_numbered(lines.seen(), "over a websocket").len() < expected.len() {
        assert!(
            Instant::now() < deadline,
            "moqx subscribe printed only {:?}",
            lines.seen()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut received = only_numbered(lines.seen(), "over a websocket");
    received.sort_by_key(|text| number(text));
    assert_eq!(received, expected);
    let _ = subscriber.kill();
    let _ = subscriber.wait();
    alice.close().await;
    bob.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_whose_relay_udp_port_is_unreachable_falls_back_to_a_websocket() {
    let _one = ONE_AT_A_TIME.lock().await;
    let relay = relay();
    let chromium = Chromium::start();
    // WebTransport goes to a UDP port nothing listens on; the WebSocket to the relay.
    let closed = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|socket| socket.local_addr())
        .expect("a free UDP port")
        .port();
    let query = format!(
        "name=alice&room=fallback&autojoin=1&relay=https://127.0.0.1:{closed}&ws=ws://127.0.0.1:{}/fallback&fingerprint={}",
        relay.port(),
        relay.fingerprint().trim()
    );
    let page = chromium.open(&relay.page_url(&query)).await;
    let state = page.wait_connected().await;
    assert_eq!(state["transport"], "websocket", "{state:#}");
    page.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_reconnects_carries_on_after_its_relay_restarts() {
    let _one = ONE_AT_A_TIME.lock().await;
    // One certificate for both lives of the relay: the page pins its fingerprint.
    let files = tempfile::tempdir().unwrap();
    let certificate =
        moqx_runtime::tls::Certificate::self_signed(&["127.0.0.1".into(), "localhost".into()])
            .unwrap();
    let (chain, key) = (files.path().join("chain.pem"), files.path().join("key.pem"));
    std::fs::write(&chain, certificate.chain_pem()).unwrap();
    std::fs::write(&key, certificate.key_pem()).unwrap();
    let binary = workspace_binary("moqx-relay", "moqx-relay", false, false);
    let start = |port| {
        Relay::start_with(
            &binary,
            &web_root(),
            RelayOptions {
                port,
                certificate: Some((chain.clone(), key.clone())),
                args: vec!["--drain".into(), "1".into()],
            },
        )
    };
    let mut relay = start(None);
    let port = relay.port();

    let chromium = Chromium::start();
    let page = chromium
        .open(&relay.page_url("name=alice&room=comeback&autojoin=1&reconnect=1"))
        .await;
    page.wait_connected().await;
    let mut publisher = moq(
        &relay,
        &[
            "publish",
            &relay.moqt_url("comeback"),
            "carol",
            "--track",
            "chat",
            "--group-size",
            "1",
            "--reconnect",
        ],
    )
    .stdin(Stdio::piped())
    .spawn()
    .expect("moqx publish runs");
    let mut stdin = publisher.stdin.take().unwrap();
    publish_to_page(&page, &mut stdin, "carol", "before the restart").await;

    // The relay restarts: it drains (GOAWAY, 1 s), exits, and comes back on its port.
    relay.terminate();
    relay.wait_exit();
    let relay = start(Some(port));
    let state = page
        .wait_until("the page to reconnect", |state| {
            state["status"] == "connected" && state["connects"].as_u64() >= Some(2)
        })
        .await;
    assert_eq!(state["error"], Value::Null, "{state:#}");
    // Carol (reconnected too) reaches the page again: every numbered message, in order.
    publish_to_page(&page, &mut stdin, "carol", "after the restart").await;

    // The page's own broadcast is back on the new relay: `moqx subscribe` hears it.
    let (mut subscriber, mut lines) = subscribe_to_page(&relay, &page, "comeback").await;
    assert!(lines.seen()[0].starts_with("warm-up"), "{:?}", lines.seen());
    let _ = subscriber.kill();
    let _ = subscriber.wait();
    drop(stdin);
    let _ = publisher.kill();
    let _ = publisher.wait();
    page.close().await;
}
