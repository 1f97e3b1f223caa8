//! `Connection`: one session with a relay.

use moq_net::model::{BroadcastProducer, Origin, Path, Track};
use moq_net::session::{Session, SessionConfig};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use super::error::{from_moq, moq_error, set};
use super::iterator::async_iterable;
use super::options::connect_options;
use super::{Announcements, Publisher, Subscription};
use crate::connect::connect;
use crate::race::Transport;

/// A moq-lite session with a relay, over WebTransport or (where WebTransport is missing or
/// broken, or UDP blocked) a WebSocket: what this page publishes, and what it subscribes
/// to.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Connection {
    session: Session,
    transport: Transport,
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
    /// object: `{ fingerprint, versions: ["moq-lite-05", …], transports: ["webtransport",
    /// "websocket"], webSocketUrl, headStartMs, timeoutMs }`. WebTransport and a WebSocket
    /// are raced (WebTransport first, 500 ms ahead; 10 s for it all unless `timeoutMs`);
    /// `transport` says which won. Rejects with a
    /// `MoqError` (code 4, transport) if the session cannot be set up, and throws a
    /// `RangeError` for a bad option.
    pub async fn connect(url: String, options: JsValue) -> Result<Connection, JsValue> {
        let mut options = connect_options(&options)?;
        let published = Origin::new();
        let discovered = Origin::new();
        let session = SessionConfig {
            publish: Some(published.clone()),
            subscribe: Some(discovered.clone()),
            ..SessionConfig::default()
        };
        options.session = session;
        let connected = connect(&url, options)
            .await
            .map_err(|error| moq_error(moq_net::Error::Transport.to_code(), &error.to_string()))?;
        Ok(Connection {
            session: connected.session,
            transport: connected.transport,
            published,
            discovered,
            url,
        })
    }

    /// Resolves once both sides have exchanged SETUP (the relay accepted the session);
    /// rejects with a `MoqError` if it ended first.
    pub fn established(&self) -> js_sys::Promise {
        let session = self.session.clone();
        let url = self.url.clone();
        future_to_promise(async move {
            session
                .established()
                .await
                .map(|_| JsValue::UNDEFINED)
                .map_err(|error| {
                    let url = moq_net::redact::Redacted(&url);
                    from_moq(error, &format!("the session with {url}"))
                })
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
            Subscription::new(self.session.clone(), self.discovered.clone(), path, track);
        async_iterable(subscription.into())
    }

    /// The broadcasts under `prefix` (`""` for all) as they come and go, as an async
    /// iterator of `{ path, active }` (see `Announcements`).
    pub fn announced(&self, prefix: &str) -> JsValue {
        let announced = self.discovered.announced(Path::new(prefix));
        async_iterable(Announcements::new(self.session.clone(), announced).into())
    }

    /// Closes the session (code 0, cancel). Idempotent.
    pub fn close(&self) {
        self.session.close(moq_net::Error::Cancel);
    }

    /// Resolves with `{ code, reason }` once the session has ended.
    pub fn closed(&self) -> js_sys::Promise {
        let session = self.session.clone();
        future_to_promise(async move {
            let error = session.closed().await;
            let value = js_sys::Object::new();
            set(&value, "code", &JsValue::from_f64(error.to_code() as f64));
            set(&value, "reason", &JsValue::from_str(&error.to_string()));
            Ok(value.into())
        })
    }

    /// Resolves with the URI the relay names (`""`: the same place, later) once it says
    /// it is going away (GOAWAY: it is shutting down), or with `null` if the session ended
    /// first. The session goes on until the relay closes it: a page should connect again
    /// (to that URI, or another relay) and move its broadcasts and subscriptions there.
    #[wasm_bindgen(js_name = goingAway)]
    pub fn going_away(&self) -> js_sys::Promise {
        let session = self.session.clone();
        future_to_promise(async move {
            Ok(match session.going_away().await {
                Ok(uri) => JsValue::from_str(&uri),
                Err(_) => JsValue::NULL,
            })
        })
    }

    /// The connection's counters: `{ rttMs, bytesSent, bytesReceived, packetsLost }`
    /// (`rttMs` is `undefined` until measured).
    pub fn stats(&self) -> JsValue {
        let stats = self.session.stats();
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

    /// What the session runs over: `"webtransport"` or `"websocket"`.
    #[wasm_bindgen(getter)]
    pub fn transport(&self) -> String {
        self.transport.name().to_owned()
    }

    /// The moq-lite version the relay chose (`"moq-lite-05"`, …).
    #[wasm_bindgen(getter)]
    pub fn version(&self) -> String {
        self.session.version().alpn().to_owned()
    }
}
