//! A client that reconnects (`moqx_net::reconnect`), in virtual time: it comes back after
//! failed dials and a lost session with its subscription carrying on, moves to the relay
//! a GOAWAY names before leaving the old one, and stops for good once closed.

mod common;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use common::relay::{Relay, SECOND};
use common::seeded;
use moqx_net::model::{BroadcastProducer, Origin, Track};
use moqx_net::reconnect::{OVERLAP, Reconnect, hop_id};
use moqx_net::runtime::Deadline;
use moqx_net::runtime::Runtime;
use moqx_net::runtime::test::{LinkConfig, TestRuntime};
use moqx_net::session::{Session, SessionConfig};

/// Relays by URL, and what the client dialed.
#[derive(Clone, Default)]
struct Network {
    relays: Rc<RefCell<HashMap<String, Relay>>>,
    /// URLs that refuse a dial this many more times.
    refusing: Rc<RefCell<HashMap<String, u32>>>,
    /// The link the next session is made over (a link that drops, say), then the default.
    next_link: Rc<RefCell<Option<LinkConfig>>>,
    dialed: Rc<RefCell<Vec<String>>>,
    sessions: Rc<RefCell<Vec<Session>>>,
}

impl Network {
    fn add(&self, url: &str, relay: Relay) {
        self.relays.borrow_mut().insert(url.to_owned(), relay);
    }

    /// A reconnecting client of `urls` subscribing into `origin`, and its task spawned.
    fn client(&self, runtime: &TestRuntime, urls: &[&str], origin: &Origin) -> Reconnect<Session> {
        let config = {
            let mut session_config = SessionConfig::default();
            session_config.subscribe = Some(origin.clone());
            session_config.origin_id = hop_id(runtime.seed());
            session_config
        };
        let network = self.clone();
        let dialer = runtime.clone();
        let (reconnect, task) = Reconnect::new(
            runtime.clone(),
            urls.iter().map(|url| (*url).to_owned()).collect(),
            runtime.seed(),
            move |url: String| std::future::ready(network.dial(&dialer, &url, config.clone())),
        );
        runtime.spawn_task(task);
        reconnect
    }

    fn dial(
        &self,
        runtime: &TestRuntime,
        url: &str,
        config: SessionConfig,
    ) -> Result<Session, String> {
        self.dialed.borrow_mut().push(url.to_owned());
        if let Some(left) = self
            .refusing
            .borrow_mut()
            .get_mut(url)
            .filter(|left| **left > 0)
        {
            *left -= 1;
            return Err(format!("{url} refused"));
        }
        let mut relays = self.relays.borrow_mut();
        let relay = relays
            .get_mut(url)
            .ok_or_else(|| format!("no relay at {url}"))?;
        if let Some(link) = self.next_link.borrow_mut().take() {
            relay.link = link;
        } else {
            relay.link = LinkConfig::default();
        }
        let session = relay.connect(runtime, config);
        self.sessions.borrow_mut().push(session.clone());
        Ok(session)
    }
}

/// Groups read from `origin`'s `path`/`name`, followed across sessions.
fn follow(runtime: &TestRuntime, origin: &Origin, path: &str, name: &str) -> Rc<RefCell<Vec<u64>>> {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let out = seen.clone();
    let (origin, path, name) = (origin.clone(), path.to_owned(), name.to_owned());
    runtime.spawn_task(async move {
        let mut followed = origin.follow_track(path.as_str(), &name).await.unwrap();
        loop {
            match followed.next_group().await {
                Ok(Some(group)) => out.borrow_mut().push(group.sequence()),
                ended => panic!("the followed track ended: {ended:?}"),
            }
        }
    });
    seen
}

/// Publishes one group every 100 ms, forever.
fn publish_every_100ms(runtime: &TestRuntime, mut track: moqx_net::model::TrackProducer) {
    let clock = runtime.clone();
    runtime.spawn_task(async move {
        for n in 0.. {
            let mut group = track.append_group();
            group.write(n, format!("{n}"));
            group.finish();
            let mut deadline = clock.deadline();
            deadline.set(Some(clock.now() + Duration::from_millis(100)));
            moqx_kio::wait(|waiter| deadline.poll(waiter)).await;
        }
    });
}

#[test]
fn a_client_comes_back_after_refused_dials_and_a_lost_session_and_its_subscription_carries_on() {
    seeded(61, |runtime| {
        let network = Network::default();
        // Alice publishes with a hop id of her own, as a reconnecting client does: it is
        // how the follower knows the broadcast back on the new session is hers.
        let mut relay = Relay::with_id(1);
        let published = Origin::new();
        let broadcast = BroadcastProducer::new();
        let track = broadcast.create_track(Track::new("chat"));
        published.publish("alice", &broadcast).unwrap();
        let _alice = relay.connect(runtime, {
            let mut session_config = SessionConfig::default();
            session_config.publish = Some(published);
            session_config.origin_id = 77;
            session_config
        });
        network.add("relay", relay);
        publish_every_100ms(runtime, track);
        // Down for two dials; then up, over a link that drops at 3 s.
        network.refusing.borrow_mut().insert("relay".into(), 2);
        *network.next_link.borrow_mut() = Some({
            let mut link_config = LinkConfig::default();
            link_config.drop_after = Some(3 * SECOND);
            link_config
        });

        let origin = Origin::new();
        let client = network.client(runtime, &["relay"], &origin);
        let seen = follow(runtime, &origin, "alice", "chat");
        // Two refusals, each waited out (0.5–1 s, then 1–2 s): connected within 4 s.
        assert!(runtime.run_until(4 * SECOND, || client.connects() == 1));
        assert_eq!(*network.dialed.borrow(), ["relay", "relay", "relay"]);
        assert!(runtime.run_until(SECOND, || !seen.borrow().is_empty()));
        let first = network.sessions.borrow()[0].clone();

        // The link drops: the session ends, the client waits (a short-lived session counts
        // as a failure: 2–4 s) and comes back, and the followed track carries on.
        assert!(runtime.run_until(4 * SECOND, || first.is_closed()));
        assert!(client.session().is_none(), "no session while reconnecting");
        assert!(runtime.run_until(5 * SECOND, || client.connects() == 2));
        let before = *seen.borrow().last().unwrap();
        assert!(runtime.run_until(SECOND, || *seen.borrow().last().unwrap() > before + 5));
        assert!(!client.session().unwrap().is_closed());
    });
}

#[test]
fn a_goaway_moves_the_client_to_the_relay_it_names_before_the_old_session_is_closed() {
    seeded(62, |runtime| {
        let network = Network::default();
        network.add("one", Relay::new());
        network.add("two", Relay::new());
        let origin = Origin::new();
        let client = network.client(runtime, &["one"], &origin);
        assert!(runtime.run_until(SECOND, || client.session().is_some()));
        let old = client.session().unwrap();
        assert!(runtime.run_until(SECOND, || old.peer_setup().is_some()));

        // Relay one is going away, to two: the client dials two at once (no backoff),
        // with the old session still up.
        network.relays.borrow()["one"].sessions[0].goaway("two");
        assert!(runtime.run_until(SECOND, || client.connects() == 2));
        assert_eq!(*network.dialed.borrow(), ["one", "two"]);
        assert!(!old.is_closed(), "the old session overlaps the new one");
        let new = client.session().unwrap();
        assert_eq!(network.sessions.borrow().len(), 2);
        assert!(!new.is_closed());

        // The client closes the old session itself after the overlap.
        let started = runtime.elapsed();
        assert!(runtime.run_until(2 * OVERLAP, || old.is_closed()));
        assert!(runtime.elapsed() - started <= OVERLAP);
        assert!(!new.is_closed());
    });
}

#[test]
fn a_closed_client_closes_its_session_and_never_dials_again() {
    seeded(63, |runtime| {
        let network = Network::default();
        network.add("relay", Relay::new());
        let origin = Origin::new();
        let client = network.client(runtime, &["relay"], &origin);
        assert!(runtime.run_until(SECOND, || client.session().is_some()));
        let session = client.session().unwrap();
        client.close();
        assert!(runtime.run_until(SECOND, || session.is_closed()));
        assert_eq!(session.close_error(), Some(moqx_net::Error::Cancel));
        assert!(client.session().is_none());
        assert!(pollster::block_on(client.connected()).is_none());
        runtime.advance(60 * SECOND);
        assert_eq!(network.dialed.borrow().len(), 1, "no dial after the close");
        assert_eq!(client.connects(), 1);
    });
}
