//! A relay's per-session authorization and limits, in virtual time: the `authorize` hook
//! deciding from the client's SETUP, scoped origins keeping a session inside its rights,
//! and the subscription limit.

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use common::seeded;
use moqx_net::Error;
use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::runtime::test::{LinkConfig, TestRuntime};
use moqx_net::session::{self, Authorize, Origins, Session, SessionConfig};

const SECOND: Duration = Duration::from_secs(1);

/// A subscription's track name, and the first frame's size or the error it ended with.
type Outcome = (String, Result<usize, Error>);

/// A relay whose sessions are authorized by their SETUP path: `/room?token=ok-alice` may
/// publish `room/alice` and read all of `room`; anything else is refused.
struct Relay {
    origin: Origin,
    sessions: Vec<Session>,
}

impl Relay {
    fn new() -> Self {
        Self {
            origin: Origin::new(),
            sessions: Vec::new(),
        }
    }

    fn config(&self) -> SessionConfig {
        let origin = self.origin.clone();
        SessionConfig::default().with_authorize(Authorize::new(move |setup| {
            match setup.path.as_deref() {
                Some("/room?token=ok-alice") => Ok(Origins {
                    publish: Some(origin.scope("room", [""])),
                    subscribe: Some(origin.scope("room", ["alice"])),
                    valid_for: None,
                    ..Origins::default()
                }),
                _ => Err(Error::Unauthorized),
            }
        }))
    }

    /// Connects a client sending `path` in its SETUP.
    fn connect(&mut self, runtime: &TestRuntime, path: &str, client: SessionConfig) -> Session {
        let (client_end, relay_end) = runtime.connect(LinkConfig::default());
        self.sessions
            .push(session::accept(runtime.clone(), relay_end, self.config()));
        session::connect(runtime.clone(), client_end, {
            let mut session_config = client;
            session_config.path = Some(path.to_owned());
            session_config
        })
    }
}

/// A client publishing one broadcast at `path` (relative to where it connects).
fn publishing(path: &str) -> (SessionConfig, BroadcastProducer) {
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new();
    origin.publish(path, &broadcast).unwrap();
    let config = SessionConfig::default().with_publisher(&origin);
    (config, broadcast)
}

fn close_reason(runtime: &TestRuntime, session: &Session) -> Option<Error> {
    if !runtime.run_until(SECOND, || session.is_closed()) {
        return None;
    }
    let session = session.clone();
    Some(runtime.block_on(SECOND, async move { session.closed().await }))
}

#[test]
fn a_client_the_hook_refuses_is_closed_with_unauthorized_and_others_carry_on() {
    seeded(101, |runtime| {
        let mut relay = Relay::new();
        let (config, _intruder) = publishing("alice");
        let refused = relay.connect(runtime, "/room?token=forged", config);
        let (config, _alice) = publishing("alice");
        let allowed = relay.connect(runtime, "/room?token=ok-alice", config);

        assert_eq!(close_reason(runtime, &refused), Some(Error::Unauthorized));
        let established = |session: &Session| {
            let session = session.clone();
            runtime.block_on(
                SECOND,
                async move { session.established().await.map(|_| ()) },
            )
        };
        assert_eq!(
            established(&refused),
            Err(Error::Unauthorized),
            "a refused client never sees the server's SETUP"
        );
        assert_eq!(established(&allowed), Ok(()));
        assert!(
            runtime.run_until(SECOND, || relay
                .origin
                .consume_broadcast("room/alice")
                .is_some()),
            "the authorized client's broadcast reaches the relay, under the connection's root"
        );
        assert!(!allowed.is_closed());
        assert_eq!(relay.origin.paths(""), ["room/alice".into()]);
    });
}

#[test]
fn a_client_announcing_outside_its_scope_is_closed_and_nothing_of_it_is_published() {
    seeded(102, |runtime| {
        let mut relay = Relay::new();
        let (config, _bob) = publishing("bob");
        let session = relay.connect(runtime, "/room?token=ok-alice", config);
        assert_eq!(close_reason(runtime, &session), Some(Error::Unauthorized));
        assert!(relay.origin.paths("").is_empty());
    });
}

#[test]
fn a_scoped_subscriber_sees_only_its_root_with_paths_relative_to_it() {
    seeded(103, |runtime| {
        let mut relay = Relay::new();
        let lobby = BroadcastProducer::new();
        relay.origin.publish("lobby/x", &lobby).unwrap();
        let (config, _alice) = publishing("alice");
        let _alice_session = relay.connect(runtime, "/room?token=ok-alice", config);

        let seen = Origin::new();
        let _reader = relay.connect(
            runtime,
            "/room?token=ok-alice",
            SessionConfig::default().with_subscriber(&seen),
        );
        assert!(runtime.run_until(SECOND, || seen.consume_broadcast("alice").is_some()));
        runtime.run_until_stalled();
        assert_eq!(seen.paths(""), ["alice".into()], "nothing from the lobby");
    });
}

#[test]
fn a_subscription_outside_the_sessions_scope_is_refused_with_unauthorized() {
    use moqx_net::coding::{Message, Subscribe, Version};
    use moqx_net::transport::{RecvStream, SendStream, Session as _};
    seeded(105, |runtime| {
        let origin = Origin::new();
        let lobby = BroadcastProducer::new();
        let _track = lobby.create_track(Track::new("video"));
        origin.publish("lobby", &lobby).unwrap();
        // A session that may read only `room`, asked by a raw peer for `lobby` (which
        // exists) and for `room/x` (which does not).
        let (mut raw, server_end) = runtime.connect(LinkConfig::default());
        let _server = session::accept(
            runtime.clone(),
            server_end,
            SessionConfig::default().with_publisher(&origin.scope("", ["room"])),
        );
        let waiter = moqx_kio::Waiter::new(std::task::Waker::noop());
        let std::task::Poll::Ready(Ok(mut setup)) = raw.poll_open_uni(&waiter) else {
            panic!("the test transport opens at once");
        };
        // The minimal client SETUP stream: type 1, length 1, no parameters.
        let _ = setup.poll_write(&waiter, &mut bytes::Bytes::from_static(&[0x01, 0x01, 0x00]));
        setup.finish().unwrap();
        let mut answers = Vec::new();
        for (id, path) in [(0, "lobby"), (1, "room/x")] {
            let std::task::Poll::Ready(Ok((mut send, recv))) = raw.poll_open_bidi(&waiter) else {
                panic!("the test transport opens at once");
            };
            let mut bytes = bytes::BytesMut::new();
            moqx_net::coding::BidiStream::Subscribe
                .encode(&mut bytes, Version::Lite05)
                .unwrap();
            Subscribe {
                id,
                broadcast: path.into(),
                track: "video".into(),
                priority: 0,
                ordered: false,
                max_latency: Duration::ZERO,
                start: None,
                end: None,
            }
            .encode(&mut bytes, Version::Lite05)
            .unwrap();
            let _ = send.poll_write(&waiter, &mut bytes.freeze());
            std::mem::forget(send); // the request stays open, as a subscription's does
            answers.push(recv);
        }
        let mut codes = Vec::new();
        for mut recv in answers {
            let code = runtime.block_on(SECOND, async move {
                loop {
                    match moqx_kio::wait(|waiter| recv.poll_read(waiter)).await {
                        Ok(Some(_)) => continue,
                        Ok(None) => break None,
                        Err(error) => break Some(error),
                    }
                }
            });
            codes.push(code.map(Error::from));
        }
        assert_eq!(
            codes,
            [Some(Error::Unauthorized), Some(Error::NotFound)],
            "outside the scope: unauthorized, existing or not; inside but absent: not found"
        );
    });
}

#[test]
fn a_subscription_over_the_limit_is_refused_on_its_stream_and_the_session_goes_on() {
    seeded(104, |runtime| {
        // The publisher serves two tracks; its session allows the relay one subscription.
        let origin = Origin::new();
        let broadcast = BroadcastProducer::new();
        let mut first = broadcast.create_track(Track::new("first"));
        let _second = broadcast.create_track(Track::new("second"));
        origin.publish("live", &broadcast).unwrap();
        let (publisher_end, subscriber_end) = runtime.connect(LinkConfig::default());
        let publisher = session::accept(runtime.clone(), publisher_end, {
            let mut session_config = SessionConfig::default();
            session_config.publish = Some(origin);
            session_config.limits.max_subscriptions = 1;
            session_config
        });
        let seen = Origin::new();
        let _subscriber = session::connect(
            runtime.clone(),
            subscriber_end,
            SessionConfig::default().with_subscriber(&seen),
        );
        assert!(runtime.run_until(SECOND, || seen.consume_broadcast("live").is_some()));
        let remote = seen.consume_broadcast("live").expect("announced");

        let outcomes: Rc<RefCell<Vec<Outcome>>> = Rc::default();
        for name in ["first", "second"] {
            let (remote, sink) = (remote.clone(), outcomes.clone());
            runtime.spawn_task(async move {
                let outcome = match remote.subscribe_track(name).await {
                    Err(error) => Err(error),
                    Ok(mut track) => match track.next_group().await {
                        Ok(Some(mut group)) => match group.read_frame().await {
                            Ok(Some(frame)) => Ok(frame.payload.len()),
                            Ok(None) => Ok(0),
                            Err(error) => Err(error),
                        },
                        Ok(None) => Ok(0),
                        Err(error) => Err(error),
                    },
                };
                sink.borrow_mut().push((name.to_owned(), outcome));
            });
            // One at a time, so that `first` is the one holding the slot.
            assert!(runtime.run_until(SECOND, || {
                let counters = publisher.counters();
                counters.subscriptions_served + counters.subscriptions_refused
                    == if name == "first" { 1 } else { 2 }
            }));
        }
        let mut group = first.append_group();
        group.write(0, "hello");
        group.finish();
        assert!(runtime.run_until(SECOND, || outcomes.borrow().len() == 2));
        let mut outcomes = outcomes.borrow().clone();
        outcomes.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            outcomes,
            [
                ("first".to_owned(), Ok(5)),
                ("second".to_owned(), Err(Error::BoundsExceeded))
            ]
        );
        let counters = publisher.counters();
        assert_eq!(counters.subscriptions_served, 1);
        assert_eq!(counters.subscriptions_refused, 1);
        assert_eq!(counters.frames_sent, 1);
        assert_eq!(counters.payload_bytes_sent, 5);
        assert!(!publisher.is_closed());
    });
}
