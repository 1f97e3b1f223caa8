//! Which transport a page gets. WebTransport is the better one (no head-of-line blocking
//! between groups) where it works; QMux over a WebSocket works everywhere TCP does. So an
//! `https://` URL races the two, WebTransport first with a head start (500 ms by default),
//! the WebSocket alone where WebTransport is missing or known broken:
//!
//! - every Safari: WebKit's WebTransport never refills its flow-control window (WebKit bug
//!   319818), so a session stalls once it has sent a window's worth;
//! - Firefox before 153: two concurrent streams opened by the server at most, which a
//!   relay's group streams exceed at once.
//!
//! Once the WebSocket has won for a URL, later connections from the page to it give
//! WebTransport no head start (the network likely blocks UDP). The first transport to
//! establish a session wins; the other is closed.

use std::cell::RefCell;
use std::collections::HashSet;
use std::time::Duration;

use futures_util::future::{Either, select};
use moqx_net::redact::Redacted;
use wasm_bindgen::JsValue;

use crate::connect::{
    ConnectError, ConnectOptions, Connected, Transport, connect_websocket, connect_webtransport,
};

/// Connects to `url` and starts a moq-lite session on this thread's event loop, over
/// the first of `options.transports` that works (see [`Transport`](crate::Transport)): `https://` races
/// WebTransport against a WebSocket, `ws://` and `wss://` use a WebSocket alone. Resolves
/// once the session is established (the relay answered SETUP), as every driver's
/// `connect` does; a relay that refuses the client is an error naming its code.
pub async fn connect(url: &str, options: ConnectOptions) -> Result<Connected, ConnectError> {
    let Some(limit) = options.timeout else {
        return race(url, options).await;
    };
    let racing = Box::pin(race(url, options));
    let timer = Box::pin(gloo_timers::future::sleep(limit));
    match futures_util::future::select(racing, timer).await {
        futures_util::future::Either::Left((result, _)) => result,
        // Dropping the race closes whatever it had opened.
        futures_util::future::Either::Right(((), _)) => Err(ConnectError::Timeout {
            url: Redacted(url).to_string(),
            after: limit,
        }),
    }
}

thread_local! {
    /// URLs (without their query, which holds tokens) the WebSocket won on this page.
    static WEBSOCKET_WON: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
}

/// Connects over the transports `options` allows, as the module documentation says.
pub(crate) async fn race(url: &str, options: ConnectOptions) -> Result<Connected, ConnectError> {
    let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
    let wants = |transport| options.transports.contains(&transport);
    let websocket_only = matches!(scheme, "ws" | "wss");
    let webtransport = !websocket_only && wants(Transport::WebTransport);
    let webtransport = webtransport && {
        let usable = webtransport_usable();
        if !usable {
            tracing::debug!("WebTransport is missing or known broken here: WebSocket alone");
        }
        usable
    };
    let websocket_url = match websocket_only {
        true => Some(url.to_owned()),
        false => options
            .websocket_url
            .clone()
            .or_else(|| websocket_url_for(url)),
    }
    .filter(|_| websocket_only || wants(Transport::WebSocket));
    let key = without_query(url);
    let head_start = match WEBSOCKET_WON.with(|won| won.borrow().contains(&key)) {
        true => Duration::ZERO,
        false => options.head_start,
    };
    let connected = match (webtransport, websocket_url) {
        (false, None) => {
            return Err(ConnectError::Refused {
                url: Redacted(url).to_string(),
                reason: "no transport to try: WebTransport is unavailable here and the WebSocket is not allowed".to_owned(),
            });
        }
        (true, None) => connect_webtransport(url, &options)
            .await
            .map(|session| (session, Transport::WebTransport)),
        (false, Some(websocket)) => connect_websocket(&websocket, &options)
            .await
            .map(|session| (session, Transport::WebSocket)),
        (true, Some(websocket)) => both(url, &websocket, head_start, &options).await,
    }?;
    if connected.1 == Transport::WebSocket {
        WEBSOCKET_WON.with(|won| won.borrow_mut().insert(key));
    }
    tracing::debug!(url = %Redacted(url), transport = connected.1.name(), "connected");
    Ok(Connected {
        session: connected.0,
        transport: connected.1,
    })
}

/// WebTransport to `url` and, after `head_start`, a WebSocket to `websocket`: the first
/// session established wins; if one fails, the other's outcome is the answer.
async fn both(
    url: &str,
    websocket: &str,
    head_start: Duration,
    options: &ConnectOptions,
) -> Result<(moqx_net::session::Session, Transport), ConnectError> {
    let quic = Box::pin(connect_webtransport(url, options));
    let tcp = Box::pin(async move {
        if !head_start.is_zero() {
            gloo_timers::future::sleep(head_start).await;
        }
        connect_websocket(websocket, options).await
    });
    match select(quic, tcp).await {
        Either::Left((Ok(session), _)) => Ok((session, Transport::WebTransport)),
        Either::Right((Ok(session), _)) => Ok((session, Transport::WebSocket)),
        Either::Left((Err(first), tcp)) => match tcp.await {
            Ok(session) => Ok((session, Transport::WebSocket)),
            Err(second) => Err(failed(url, first, second)),
        },
        Either::Right((Err(first), quic)) => match quic.await {
            Ok(session) => Ok((session, Transport::WebTransport)),
            Err(second) => Err(failed(url, second, first)),
        },
    }
}

fn failed(url: &str, webtransport: ConnectError, websocket: ConnectError) -> ConnectError {
    // A relay that refused the session refused it on either transport: say that.
    if let ConnectError::SessionRefused { .. } = websocket {
        return websocket;
    }
    ConnectError::Failed {
        url: Redacted(url).to_string(),
        failures: vec![
            format!("WebTransport: {webtransport}"),
            format!("WebSocket: {websocket}"),
        ],
    }
}

/// The WebSocket URL for a WebTransport one: the same host, port and path, `wss://` (or
/// `ws://` for an `http://` URL).
fn websocket_url_for(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = match scheme {
        "https" => "wss",
        "http" => "ws",
        _ => return None,
    };
    Some(format!("{scheme}://{rest}"))
}

fn without_query(url: &str) -> String {
    url.split(['?', '#']).next().unwrap_or(url).to_owned()
}

/// Whether this browser has a WebTransport that works for moq-lite: present, and not
/// Safari's nor a Firefox before 153.
fn webtransport_usable() -> bool {
    let global = js_sys::global();
    let present = js_sys::Reflect::get(&global, &JsValue::from_str("WebTransport"))
        .is_ok_and(|value| !value.is_undefined());
    present && !known_broken(&user_agent(&global))
}

fn user_agent(global: &js_sys::Object) -> String {
    js_sys::Reflect::get(global, &JsValue::from_str("navigator"))
        .and_then(|navigator| js_sys::Reflect::get(&navigator, &JsValue::from_str("userAgent")))
        .ok()
        .and_then(|agent| agent.as_string())
        .unwrap_or_default()
}

/// Whether a user agent string names a browser whose WebTransport is known broken.
fn known_broken(agent: &str) -> bool {
    // Chromium's agents name Safari too, for compatibility: Safari is Safari without
    // Chrome, Chromium, or an Android WebView.
    let safari = agent.contains("Safari/")
        && !["Chrome/", "Chromium/", "CriOS/", "Edg/", "Android"]
            .iter()
            .any(|other| agent.contains(other));
    let old_firefox = agent
        .split("Firefox/")
        .nth(1)
        .and_then(|version| version.split('.').next())
        .and_then(|major| major.parse::<u32>().ok())
        .is_some_and(|major| major < 153);
    safari || old_firefox
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safari_and_old_firefox_are_known_broken_and_chromium_is_not() {
        let safari = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/26.1 Safari/605.1.15";
        let iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 Mobile/15E148 Safari/604.1";
        let chrome = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/142.0.0.0 Safari/537.36";
        let firefox_old = "Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0";
        let firefox_new = "Mozilla/5.0 (X11; Linux x86_64; rv:153.0) Gecko/20100101 Firefox/153.0";
        assert!(known_broken(safari));
        assert!(known_broken(iphone));
        assert!(known_broken(firefox_old));
        assert!(!known_broken(chrome));
        assert!(!known_broken(firefox_new));
    }

    #[test]
    fn the_websocket_goes_to_the_same_host_port_and_path() {
        assert_eq!(
            websocket_url_for("https://relay.example:4443/room?jwt=x").as_deref(),
            Some("wss://relay.example:4443/room?jwt=x")
        );
        assert_eq!(
            websocket_url_for("http://127.0.0.1:4443/r").as_deref(),
            Some("ws://127.0.0.1:4443/r")
        );
        assert_eq!(websocket_url_for("moqt://a:1/"), None);
        assert_eq!(
            without_query("https://a:1/room?jwt=secret"),
            "https://a:1/room"
        );
    }
}
