//! moq-transport sessions in virtual time, every draft: two of our sessions establish, go
//! away and close cleanly; a hand-driven raw peer checks what each draft puts on the wire
//! (SETUP and 14's version confirmation, request refusals and request-id grants) and what
//! closes a session with which termination code.

mod common;

use std::task::{Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use common::moqt::RawStream;
use common::relay::{close_code, raw_client};
use common::seeded;
use moqx_kio::Waiter;
use moqx_net::Error;
use moqx_net::coding::Version;
use moqx_net::moqt::{
    ClientSetup, Control, Draft, Fetch, FetchError, FetchRange, GoAway, Location, MaxRequestId,
    RequestError, ServerSetup, SetupOptions, SubscribeNamespace, SubscribeOptions,
};
use moqx_net::runtime::test::{TestRuntime, TestTransport};
use moqx_net::sim::Relay;
use moqx_net::transport::{SendStream, Session as _};

const SECOND: Duration = Duration::from_secs(1);

/// Termination codes (§ "Session Termination Error Codes").
const NO_ERROR: u64 = 0x0;
const PROTOCOL_VIOLATION: u64 = 0x3;
const INVALID_REQUEST_ID: u64 = 0x4;
const CONTROL_MESSAGE_TIMEOUT: u64 = 0x11;
const VERSION_NEGOTIATION_FAILED: u64 = 0x15;

/// A relay whose sessions speak `version`, with request-id windows of `requests` requests.
fn relay(version: Version, requests: usize) -> Relay {
    let mut relay = Relay::new();
    relay.base.version = version;
    relay.base.limits.max_subscriptions = requests;
    relay.base.limits.max_announce_requests = 0;
    relay.link.protocol = Some(version.alpn().to_owned());
    relay
}

fn draft(version: Version) -> Draft {
    version.draft().expect("a moq-transport version")
}

/// A raw client of `relay`, its control stream open with a valid SETUP, and the relay's
/// SETUP read.
fn established(
    runtime: &TestRuntime,
    relay: &mut Relay,
    version: Version,
) -> (TestTransport, RawStream, ServerSetup) {
    let draft = draft(version);
    let mut raw = raw_client(runtime, relay);
    let mut control = RawStream::open_control(&mut raw, draft, &client_setup(draft));
    let frame = control.next(runtime, &mut raw).expect("the relay's SETUP");
    let setup = ServerSetup::from_frame(&frame, draft).expect("a SETUP");
    (raw, control, setup)
}

fn client_setup(draft: Draft) -> ClientSetup {
    ClientSetup {
        versions: match draft {
            Draft::D14 => vec![draft.version_number()],
            _ => vec![],
        },
        options: SetupOptions {
            path: Some("/".into()),
            max_request_id: (draft != Draft::D18).then_some(0),
            ..SetupOptions::default()
        },
    }
}

/// FETCH: a request this side does not serve yet.
fn fetch(request_id: u64) -> Fetch {
    Fetch {
        request_id,
        range: FetchRange::Standalone {
            namespace: moqx_net::moqt::Namespace::from_strs(["chat"]),
            name: Bytes::from_static(b"room"),
            start: Location::default(),
            end: Location {
                group: 1,
                object: 0,
            },
        },
        parameters: Default::default(),
    }
}

#[test]
fn every_draft_establishes_goes_away_and_closes_cleanly() {
    for version in Version::MOQT {
        seeded(61, |runtime| {
            let mut relay = relay(version, 100);
            let client = relay.connect(runtime, {
                let mut config = moqx_net::session::SessionConfig::default();
                config.version = version;
                config.path = Some("/room".into());
                config
            });
            let server = relay.sessions.last().cloned().expect("the relay's session");
            assert!(
                runtime.run_until(SECOND, || client.peer_setup().is_some()
                    && server.peer_setup().is_some()),
                "{version}: both sides read the other's SETUP"
            );
            assert_eq!(
                server.peer_setup().and_then(|setup| setup.path).as_deref(),
                Some("/room"),
                "{version}: the client's PATH reaches the server"
            );

            server.goaway("moqt://elsewhere.example/room");
            assert!(
                runtime.run_until(SECOND, || client.peer_goaway().is_some()),
                "{version}: GOAWAY arrives"
            );
            assert_eq!(
                client.peer_goaway().as_deref(),
                Some("moqt://elsewhere.example/room")
            );
            assert!(
                !client.is_closed() && !server.is_closed(),
                "{version}: draining"
            );

            client.close(Error::Cancel);
            assert!(runtime.run_until(SECOND, || server.is_closed()));
            assert_eq!(
                server.close_error(),
                Some(Error::Cancel),
                "{version}: NO_ERROR reads as a clean close"
            );
        });
    }
}

#[test]
fn draft_14_confirms_its_version_in_setup_and_grants_request_ids() {
    seeded(62, |runtime| {
        let mut relay = relay(Version::Moqt14, 3);
        let (_raw, _control, setup) = established(runtime, &mut relay, Version::Moqt14);
        assert_eq!(setup.version, Some(0xff00_000e), "SERVER_SETUP selects 14");
        assert_eq!(
            setup.options.max_request_id,
            Some(6),
            "three requests of the client's ids (0, 2, 4)"
        );
        assert_eq!(
            setup.options.implementation, None,
            "14 has no MOQT_IMPLEMENTATION parameter of its own (its text gives AUTHORITY's type)"
        );

        // A client that offers only draft 13 has no version in common.
        let mut raw = raw_client(runtime, &mut relay);
        let mut offer = client_setup(Draft::D14);
        offer.versions = vec![0xff00_000d];
        let _control = RawStream::open_control(&mut raw, Draft::D14, &offer);
        assert_eq!(
            close_code(runtime, &mut raw),
            Some(VERSION_NEGOTIATION_FAILED)
        );
    });
}

#[test]
fn requests_are_refused_with_not_supported_and_the_session_goes_on() {
    for version in Version::MOQT {
        seeded(63, |runtime| {
            let draft = draft(version);
            let mut relay = relay(version, 1);
            let (mut raw, mut control, setup) = established(runtime, &mut relay, version);
            let waiter = Waiter::new(Waker::noop());
            for request_id in [0, 2, 4] {
                if draft == Draft::D18 {
                    // Each request on a stream of its own, its reply on it.
                    let Poll::Ready(Ok((mut send, recv))) = raw.poll_open_bidi(&waiter) else {
                        panic!("the test transport opens at once");
                    };
                    let bytes = fetch(request_id).to_vec(draft).unwrap();
                    let _ = send.poll_write(&waiter, &mut Bytes::from(bytes));
                    let mut stream = RawStream::new(send, Some(recv), draft);
                    let reply = stream.next(runtime, &mut raw).expect("a reply");
                    let error = RequestError::from_frame(&reply, draft).expect("REQUEST_ERROR");
                    assert_eq!((error.request_id, error.code), (None, 0x3));
                    continue;
                }
                control.send(&fetch(request_id));
                let reply = control.next(runtime, &mut raw).expect("a reply");
                if draft == Draft::D14 {
                    let error = FetchError::from_frame(&reply, draft).expect("FETCH_ERROR");
                    assert_eq!((error.request_id, error.code), (request_id, 0x3));
                } else {
                    let error = RequestError::from_frame(&reply, draft).expect("REQUEST_ERROR");
                    assert_eq!((error.request_id, error.code), (Some(request_id), 0x3));
                }
                // A window of one request (ids below 2): each refusal gives its id back.
                let grant = control.next(runtime, &mut raw).expect("MAX_REQUEST_ID");
                let grant = MaxRequestId::from_frame(&grant, draft).expect("MAX_REQUEST_ID");
                assert_eq!(grant.request_id, request_id + 4, "{version}");
            }
            if draft != Draft::D18 {
                assert_eq!(setup.options.max_request_id, Some(2));
            }
            if draft != Draft::D14 {
                assert!(
                    setup
                        .options
                        .implementation
                        .is_some_and(|name| name.starts_with("moqx/")),
                    "{version}: MOQT_IMPLEMENTATION names us"
                );
            }
            if draft == Draft::D16 {
                // 16: SUBSCRIBE_NAMESPACE opens a stream of its own, answered on it: this
                // relay takes no announce requests (`max_announce_requests` 0), so it is
                // refused there, an internal error on 16 (EXCESSIVE_LOAD is 18's).
                let Poll::Ready(Ok((mut send, recv))) = raw.poll_open_bidi(&waiter) else {
                    panic!("the test transport opens at once");
                };
                let request = SubscribeNamespace {
                    request_id: 6,
                    options: Some(SubscribeOptions::Namespace),
                    ..SubscribeNamespace::default()
                };
                let _ = send.poll_write(&waiter, &mut Bytes::from(request.to_vec(draft).unwrap()));
                let mut stream = RawStream::new(send, Some(recv), draft);
                let reply = stream.next(runtime, &mut raw).expect("a reply");
                let error = RequestError::from_frame(&reply, draft).expect("REQUEST_ERROR");
                assert_eq!((error.request_id, error.code), (Some(6), 0x0));
            }
            runtime.advance(SECOND);
            assert_eq!(close_code(runtime, &mut raw), None, "{version}: still open");
        });
    }
}

#[test]
fn request_ids_out_of_sequence_or_of_the_wrong_parity_close_the_session() {
    for version in Version::MOQT {
        seeded(64, |runtime| {
            let draft = draft(version);
            let mut relay = relay(version, 10);
            let (mut raw, mut control, _) = established(runtime, &mut relay, version);
            if draft == Draft::D18 {
                // A client's request ids are even.
                let waiter = Waiter::new(Waker::noop());
                let Poll::Ready(Ok((mut send, recv))) = raw.poll_open_bidi(&waiter) else {
                    panic!("the test transport opens at once");
                };
                std::mem::forget(recv);
                let bytes = fetch(1).to_vec(draft).unwrap();
                let _ = send.poll_write(&waiter, &mut Bytes::from(bytes));
            } else {
                // The first request must be 0.
                control.send(&fetch(2));
            }
            assert_eq!(
                close_code(runtime, &mut raw),
                Some(INVALID_REQUEST_ID),
                "{version}"
            );
        });
    }
}

#[test]
fn the_control_stream_ending_closes_the_session() {
    for version in Version::MOQT {
        seeded(65, |runtime| {
            let mut relay = relay(version, 10);
            let (mut raw, mut control, _) = established(runtime, &mut relay, version);
            let _ = control.send.finish();
            assert_eq!(
                close_code(runtime, &mut raw),
                Some(PROTOCOL_VIOLATION),
                "{version}"
            );
        });
    }
}

#[test]
fn a_second_goaway_or_a_clients_goaway_uri_closes_the_session() {
    for version in Version::MOQT {
        seeded(66, |runtime| {
            let draft = draft(version);
            let goaway = |uri: &str| GoAway {
                uri: uri.into(),
                timeout: (draft == Draft::D18).then_some(Duration::ZERO),
                request_id: (draft == Draft::D18).then_some(1),
            };
            let mut relay = relay(version, 10);
            let (mut raw, mut control, _) = established(runtime, &mut relay, version);
            control.send(&goaway(""));
            runtime.advance(SECOND);
            assert_eq!(
                close_code(runtime, &mut raw),
                None,
                "{version}: one is fine"
            );
            control.send(&goaway(""));
            assert_eq!(
                close_code(runtime, &mut raw),
                Some(PROTOCOL_VIOLATION),
                "{version}: a second"
            );

            let (mut raw, mut control, _) = established(runtime, &mut relay, version);
            control.send(&goaway("moqt://elsewhere.example"));
            assert_eq!(
                close_code(runtime, &mut raw),
                Some(PROTOCOL_VIOLATION),
                "{version}: a client names no URI"
            );
        });
    }
}

#[test]
fn a_client_that_never_sends_setup_is_closed_with_control_message_timeout() {
    for version in Version::MOQT {
        seeded(67, |runtime| {
            let mut relay = relay(version, 10);
            let mut raw = raw_client(runtime, &mut relay);
            runtime.advance(relay.base.limits.setup_timeout);
            assert_eq!(
                close_code(runtime, &mut raw),
                Some(CONTROL_MESSAGE_TIMEOUT),
                "{version}"
            );
        });
    }
}

#[test]
fn a_clean_close_is_no_error_on_the_wire() {
    seeded(68, |runtime| {
        let mut relay = relay(Version::Moqt16, 10);
        let (mut raw, _control, _) = established(runtime, &mut relay, Version::Moqt16);
        let server = relay.sessions.last().cloned().expect("the relay's session");
        server.close(Error::Cancel);
        assert_eq!(close_code(runtime, &mut raw), Some(NO_ERROR));
    });
}
