//! `Connection.connect`'s second argument: a fingerprint string, or an options object.

use std::time::Duration;

use moqx_net::coding::Version;
use wasm_bindgen::JsValue;

use crate::connect::Transport;
use crate::connect::{ConnectOptions, parse_fingerprint};

/// What a page asked of its connection.
#[derive(Debug, Default)]
pub(crate) struct PageOptions {
    /// How each session is made.
    pub(crate) connect: ConnectOptions,
    /// Keep a session up across relays.
    pub(crate) reconnect: bool,
    /// More relays to reconnect to, in turn after the first.
    pub(crate) alternate_urls: Vec<String>,
}

/// Reads `value`: `undefined`, `null` or a string (a fingerprint, `""` for none), or
/// `{ fingerprint, versions, transports, webSocketUrl, headStartMs, timeoutMs, reconnect,
/// alternateUrls }`, each optional. A bad value is a `RangeError` naming the option.
pub(crate) fn connect_options(value: &JsValue) -> Result<PageOptions, JsValue> {
    let mut page = PageOptions::default();
    if value.is_undefined() || value.is_null() {
        return Ok(page);
    }
    if let Some(fingerprint) = value.as_string() {
        page.connect.fingerprints = fingerprints(&fingerprint)?;
        return Ok(page);
    }
    if !value.is_object() {
        return Err(range_error(
            "the second argument must be a fingerprint string or an options object",
        ));
    }
    if let Some(reconnect) = field(value, "reconnect")? {
        page.reconnect = reconnect
            .as_bool()
            .ok_or_else(|| range_error("reconnect must be true or false"))?;
    }
    if let Some(urls) = field(value, "alternateUrls")? {
        page.alternate_urls = strings(&urls, "alternateUrls")?;
    }
    let options = &mut page.connect;
    if let Some(fingerprint) = field(value, "fingerprint")? {
        let text = fingerprint
            .as_string()
            .ok_or_else(|| range_error("fingerprint must be a string"))?;
        options.fingerprints = fingerprints(&text)?;
    }
    if let Some(versions) = field(value, "versions")? {
        options.versions = strings(&versions, "versions")?
            .iter()
            .map(|name| {
                name.parse::<Version>()
                    .map_err(|unknown| range_error(&format!("versions: {unknown}")))
            })
            .collect::<Result<_, _>>()?;
        if options.versions.is_empty() {
            return Err(range_error("versions must name at least one"));
        }
    }
    if let Some(transports) = field(value, "transports")? {
        options.transports = strings(&transports, "transports")?
            .iter()
            .map(|name| {
                Transport::from_name(name).ok_or_else(|| {
                    range_error(&format!(
                        "transports: {name:?} is not \"webtransport\" or \"websocket\""
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        if options.transports.is_empty() {
            return Err(range_error("transports must name at least one"));
        }
    }
    if let Some(url) = field(value, "webSocketUrl")? {
        options.websocket_url = Some(
            url.as_string()
                .ok_or_else(|| range_error("webSocketUrl must be a string"))?,
        );
    }
    if let Some(millis) = field(value, "timeoutMs")? {
        let millis = millis
            .as_f64()
            .filter(|millis| millis.is_finite() && *millis > 0.0)
            .ok_or_else(|| range_error("timeoutMs must be a number of milliseconds above 0"))?;
        options.timeout = Some(Duration::from_secs_f64(millis / 1000.0));
    }
    if let Some(millis) = field(value, "headStartMs")? {
        let millis = millis
            .as_f64()
            .filter(|millis| millis.is_finite() && *millis >= 0.0)
            .ok_or_else(|| {
                range_error("headStartMs must be a number of milliseconds, 0 or more")
            })?;
        options.head_start = Duration::from_secs_f64(millis / 1000.0);
    }
    Ok(page)
}

fn fingerprints(text: &str) -> Result<Vec<[u8; 32]>, JsValue> {
    match text.trim() {
        "" => Ok(Vec::new()),
        text => Ok(vec![
            parse_fingerprint(text).map_err(|error| range_error(&error.to_string()))?,
        ]),
    }
}

/// The property `key` of `object`, `None` when absent or `undefined`.
fn field(object: &JsValue, key: &str) -> Result<Option<JsValue>, JsValue> {
    let value = js_sys::Reflect::get(object, &JsValue::from_str(key))?;
    Ok((!value.is_undefined()).then_some(value))
}

fn strings(value: &JsValue, name: &str) -> Result<Vec<String>, JsValue> {
    if !js_sys::Array::is_array(value) {
        return Err(range_error(&format!("{name} must be an array of strings")));
    }
    js_sys::Array::from(value)
        .iter()
        .map(|item| {
            item.as_string()
                .ok_or_else(|| range_error(&format!("{name} must be an array of strings")))
        })
        .collect()
}

fn range_error(message: &str) -> JsValue {
    js_sys::RangeError::new(message).into()
}
