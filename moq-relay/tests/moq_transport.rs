//! The relay and IETF moq-transport clients, as real processes: `moqx` on each draft
//! meets moq-lite clients through the relay, and `moqx interop` (the interop runner's test
//! client) passes every test case on every draft and binding.

mod common;

use std::io::Write;
use std::process::Stdio;

use common::{Relay, collect, finish};

/// The relay, as started with no version configured, serves IETF moq-transport clients
/// beside moq-lite ones from one origin: `moqx` on each draft publishes to and
/// subscribes from the other protocol, over raw QUIC and WebTransport.
#[test]
fn moq_transport_clients_meet_moq_lite_clients_through_the_relay() {
    let relay = Relay::start(&["--no-http"]);
    let pairs = [
        ("moqt", "moqt-16", "moqt", "moq-lite-05"),
        ("moqt", "moq-lite-05", "https", "moqt-18"),
        ("https", "moqt-16", "moqt", "moqt-14"),
    ];
    for (publisher_scheme, publisher, subscriber_scheme, subscriber) in pairs {
        let pair =
            format!("{publisher} over {publisher_scheme} -> {subscriber} over {subscriber_scheme}");
        let path = format!("{publisher}-to-{subscriber}");
        let reader = relay
            .moq(&[
                "subscribe",
                "--version",
                subscriber,
                &relay.url(subscriber_scheme, ""),
                &path,
            ])
            .args(["--track", "t", "--count", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut writer = relay
            .moq(&[
                "publish",
                "--version",
                publisher,
                &relay.url(publisher_scheme, ""),
                &path,
            ])
            .args(["--track", "t", "--wait", "--linger", "5"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        writer
            .stdin
            .as_mut()
            .unwrap()
            .write_all(b"one\ntwo\n")
            .unwrap();
        let (ok, out, err) = collect(reader);
        assert!(ok, "{pair}: the subscriber failed: {err}");
        assert_eq!(out, "one\ntwo\n", "{pair}");
        let (ok, _, err) = collect(writer);
        assert!(ok, "{pair}: the publisher failed: {err}");
    }
}

/// `moqx interop`, the IETF interop runner's test client, passes every test case against
/// the relay on each moq-transport draft over raw QUIC and WebTransport: TAP 14 on
/// stdout, exit 0. The relay lists moqt-14 first: a draft-14 WebTransport client names
/// no protocol, and a relay that accepts moq-lite first takes such a client for one.
#[test]
fn the_interop_runners_test_cases_pass_on_every_draft_and_binding() {
    let relay = Relay::start(&[
        "--no-http",
        "--moq-version",
        "moqt-14,moq-lite-05,moqt-18,moqt-16",
    ]);
    for draft in ["moqt-14", "moqt-16", "moqt-18"] {
        for scheme in ["moqt", "https"] {
            let output =
                finish(relay.moq(&["interop", "-r", &relay.url(scheme, ""), "--draft", draft]));
            let tap = String::from_utf8_lossy(&output.stdout);
            assert!(output.status.success(), "{draft} over {scheme}:\n{tap}");
            assert!(tap.starts_with("TAP version 14\n"), "{tap}");
            assert!(tap.contains("\n1..6\n"), "{tap}");
            assert_eq!(
                tap.matches("\nok ").count(),
                6,
                "{draft} over {scheme}:\n{tap}"
            );
        }
    }
    // A test case the client does not know: exit 127, as the contract says.
    let unknown = finish(relay.moq(&[
        "interop",
        "-r",
        &relay.url("moqt", ""),
        "-t",
        "no-such-test",
    ]));
    assert_eq!(unknown.status.code(), Some(127));
}
