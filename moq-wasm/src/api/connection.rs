//! `Connection`: one session with a relay.

use std::cell::RefCell;
use std::rc::Rc;

use moqx_net::model::{BroadcastProducer, Origin, Path, Track};
use moqx_net::session::SessionConfig;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use super::error::{from_moq, moq_error, set};
use super::iterator::async_iterable;
use super::link::Link;
use super::options::connect_options;
use super::{Announcements, Publisher, Subscription};
use crate::connect::Connected;
use crate::race::connect;
use crate::reconnect::reconnect;

/// A moq-lite session with a relay, over WebTransport or (where WebTransport is missing or
/// broken, or UDP blocked) a WebSocket: what this page publishes, and what it subscribes
/// to. With `reconnect`, the session is kept up across relays: a new one is made when it
/// ends or its relay goes away, with the same publications and subscriptions.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Connection {
    link: Link,
    /// The last session seen up: what `transport`, `version` and `stats` describe while
    /// reconnecting.
    last: RefCell<Connected>,
    /// What this page publishes: served to the relay.
    published: Origin,
    /// What the relay announces: filled by the session.
    discovered: Origin,
    url: String,
}

#[wasm_bindgen]
impl Connection {
    /// Connects to `url` (`https://host:port/root`, the root scoping every path; or
    /// `ws://`/`wss://` for a WebSocket alone). The second argument is the relay's
    /// certificate fingerprint (the SHA-256 it serves at `/certificate.sha256`, hex, with
    /// or without colons), pinned as a self-signed certificate must be, or an options
    /// object: `{ fingerprint, versions: ["moq-lite-05", "moqt-18", …], transports: ["webtransport",
    /// "websocket"], webSocketUrl, headStartMs, timeoutMs, reconnect, alternateUrls }`.
    /// WebTransport and a WebSocket are raced (WebTransport first, 500 ms ahead; 10 s
    /// for it all unless `timeoutMs`); `transport` says which won. Rejects with a
    /// `MoqError` (code 4, transport) if the session cannot be set up, and throws a
    /// `RangeError` for a bad option.
    ///
    /// With `reconnect: true`, once this first session is up the connection keeps one up:
    /// when it ends (the relay restarted, the network dropped) or the relay says it is
    /// going away, a new one is made (to the URL a GOAWAY names, else `url` and then each
    /// of `alternateUrls` in turn, backing off from 1 s to 10 s between failures), and
    /// publications and subscriptions carry on over it.
    pub async fn connect(url: String, options: JsValue) -> Result<Connection, JsValue> {
        let options = connect_options(&options)?;
        let mut connect_options = options.connect;
        let published = Origin::new();
        let discovered = Origin::new();
        connect_options.session = SessionConfig::default()
            .with_publisher(&published)
            .with_subscriber(&discovered);
        if options.reconnect {
            // A hop id of its own from the first session on: how relays know the page's
            // broadcasts on its next session for the same publisher's.
            connect_options.session.origin_id =
                moqx_net::reconnect::hop_id(crate::reconnect::random());
        }
        let connected = connect(&url, connect_options.clone())
            .await
            .map_err(|error| moq_error(moqx_net::Error::Transport.to_code(), &error.to_string()))?;
        let link = if options.reconnect {
            let mut urls = vec![url.clone()];
            urls.extend(options.alternate_urls);
            Link::Kept(Rc::new(reconnect(
                urls,
                connect_options,
                Some(connected.clone()),
            )))
        } else {
            Link::Once(connected.clone())
        };
        Ok(Connection {
            link,
            last: RefCell::new(connected),
            published,
            discovered,
            url,
        })
    }

    /// Resolves once both sides have exchanged SETUP (the relay accepted the session);
    /// rejects with a `MoqError` if it ended first. With `reconnect`: once a session is
    /// up (rejecting only once closed).
    pub fn established(&self) -> js_sys::Promise {
        let link = self.link.clone();
        let url = self.url.clone();
        future_to_promise(async move {
            let ended = |error| {
                let url = moqx_net::redact::Redacted(&url);
                from_moq(error, &format!("the session with {url}"))
            };
            let connected = link
                .connected()
                .await
                .ok_or_else(|| ended(moqx_net::Error::Cancel))?;
            connected
                .session
                .established()
                .await
                .map(|_| JsValue::UNDEFINED)
                .map_err(ended)
        })
    }

    /// Publishes a broadcast at `path` with one track named `track`. Throws a `MoqError`
    /// (duplicate) if this connection already publishes `path`.
    pub fn publish(&self, path: &str, track: &str) -> Result<Publisher, JsValue> {
        let broadcast = BroadcastProducer::new();
        let writer = broadcast.create_track(Track {
            timescale: 1_000_000, // timestamps in microseconds
            ..Track::new(track)
        });
        self.published
            .publish(Path::new(path), &broadcast)
            .map_err(|error| from_moq(error, &format!("publishing {path}")))?;
        Ok(Publisher::new(broadcast, writer, path.to_owned()))
    }

    /// The frames of `track` in the broadcast at `path`, as an async iterator (see
    /// `Subscription`). It waits for the broadcast to be announced.
    pub fn subscribe(&self, path: &str, track: &str) -> JsValue {
        let subscription =
            Subscription::new(self.link.clone(), self.discovered.clone(), path, track);
        async_iterable(subscription.into())
    }

    /// The broadcasts under `prefix` (`""` for all) as they come and go, as an async
    /// iterator of `{ path, active }` (see `Announcements`).
    pub fn announced(&self, prefix: &str) -> JsValue {
        let announced = self.discovered.announced(Path::new(prefix));
        async_iterable(Announcements::new(self.link.clone(), announced).into())
    }

    /// Closes the session (code 0, cancel), and stops reconnecting. Idempotent.
    pub fn close(&self) {
        self.link.close();
    }

    /// Resolves with `{ code, reason }` once the session has ended (with `reconnect`:
    /// once the connection is closed).
    pub fn closed(&self) -> js_sys::Promise {
        let link = self.link.clone();
        future_to_promise(async move {
            let error = link.closed().await;
            let value = js_sys::Object::new();
            set(&value, "code", &JsValue::from_f64(error.to_code() as f64));
            set(&value, "reason", &JsValue::from_str(&error.to_string()));
            Ok(value.into())
        })
    }

    /// Resolves with the URI the relay names (`""`: the same place, later) once it says
    /// it is going away (GOAWAY: it is shutting down), or with `null` if the session ended
    /// first. The session goes on until the relay closes it: a page should connect again
    /// (to that URI, or another relay) and move its broadcasts and subscriptions there;
    /// with `reconnect` the connection does it by itself (this is then about the session
    /// up now: `null` while none is).
    #[wasm_bindgen(js_name = goingAway)]
    pub fn going_away(&self) -> js_sys::Promise {
        let session = self.link.session();
        future_to_promise(async move {
            let Some(session) = session else {
                return Ok(JsValue::NULL);
            };
            Ok(match session.going_away().await {
                Ok(uri) => JsValue::from_str(&uri),
                Err(_) => JsValue::NULL,
            })
        })
    }

    /// `"connected"` while a session is up, `"reconnecting"` while a kept-up connection
    /// makes a new one, `"closed"` once it has ended.
    #[wasm_bindgen(getter)]
    pub fn status(&self) -> String {
        let status = match &self.link {
            Link::Once(connected) if connected.session.is_closed() => "closed",
            Link::Once(_) => "connected",
            Link::Kept(reconnect) if reconnect.is_closed() => "closed",
            Link::Kept(reconnect) => match reconnect.session() {
                Some(session) if !session.is_closed() => "connected",
                _ => "reconnecting",
            },
        };
        status.to_owned()
    }

    /// How many sessions were established so far (1 unless reconnected).
    #[wasm_bindgen(getter)]
    pub fn connects(&self) -> f64 {
        match &self.link {
            Link::Once(_) => 1.0,
            Link::Kept(reconnect) => reconnect.connects() as f64,
        }
    }

    /// The connection's counters: `{ rttMs, bytesSent, bytesReceived, packetsLost }`
    /// (`rttMs` is `undefined` until measured), of the session up now (else the last).
    pub fn stats(&self) -> JsValue {
        let stats = self.latest().session.stats();
        let value = js_sys::Object::new();
        let rtt = stats.rtt.map_or(JsValue::UNDEFINED, |rtt| {
            JsValue::from_f64(rtt.as_secs_f64() * 1000.0)
        });
        set(&value, "rttMs", &rtt);
        set(
            &value,
            "bytesSent",
            &JsValue::from_f64(stats.bytes_sent as f64),
        );
        set(
            &value,
            "bytesReceived",
            &JsValue::from_f64(stats.bytes_received as f64),
        );
        set(
            &value,
            "packetsLost",
            &JsValue::from_f64(stats.packets_lost as f64),
        );
        value.into()
    }

    /// The URL it connected to.
    #[wasm_bindgen(getter)]
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// What the session runs over: `"webtransport"` or `"websocket"` (the last session's
    /// while reconnecting).
    #[wasm_bindgen(getter)]
    pub fn transport(&self) -> String {
        self.latest().transport.name().to_owned()
    }

    /// The protocol version the relay chose, by name (`"moq-lite-05"`, `"moqt-18"`, …; the
    /// last session's while reconnecting).
    #[wasm_bindgen(getter)]
    pub fn version(&self) -> String {
        self.latest().session.version().name().to_owned()
    }
}

impl Connection {
    /// The session up now, else the last one that was.
    fn latest(&self) -> Connected {
        if let Some(current) = self.link.current() {
            *self.last.borrow_mut() = current;
        }
        self.last.borrow().clone()
    }
}
