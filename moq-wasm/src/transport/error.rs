//! From the browser's errors to the transport's.

use moqx_net::transport::{StreamError, TransportError};
use wasm_bindgen::{JsCast, JsValue};

use crate::bindings::{WebTransportError, WebTransportErrorOptions, dictionary};

/// A readable message for any thrown value: an `Error`'s message, else its string form.
pub(crate) fn message(value: &JsValue) -> String {
    if let Some(error) = value.dyn_ref::<js_sys::Error>() {
        return String::from(error.message());
    }
    if let Some(error) = value.dyn_ref::<WebTransportError>()
        && let Some(message) = error.message()
    {
        return message;
    }
    value.as_string().unwrap_or_else(|| format!("{value:?}"))
}

/// The code a stream error carries, if it is one (`source: "stream"`).
fn stream_code(value: &JsValue) -> Option<u64> {
    let error = value.dyn_ref::<WebTransportError>()?;
    if error.source().as_deref() != Some("stream") {
        return None;
    }
    // The spec's `unsigned long`; a stream error without one is code 0.
    Some(error.stream_error_code().map_or(0, |code| code as u64))
}

/// What a failed read means: the peer reset the stream, or the session is gone.
pub(crate) fn read_error(value: &JsValue) -> StreamError {
    match stream_code(value) {
        Some(code) => StreamError::Reset(code),
        None => StreamError::Connection(TransportError::Lost(message(value))),
    }
}

/// What a failed write means: the peer stopped the stream, or the session is gone.
pub(crate) fn write_error(value: &JsValue) -> StreamError {
    match stream_code(value) {
        Some(code) => StreamError::Stopped(code),
        None => StreamError::Connection(TransportError::Lost(message(value))),
    }
}

/// A `WebTransportError` carrying `code`, for resetting or stopping a stream with it.
pub(crate) fn stream_error_with_code(code: u64) -> JsValue {
    let options: WebTransportErrorOptions = dictionary();
    // The browser takes 32-bit codes (moq-lite's are small); a larger one saturates.
    options.set_stream_error_code(u32::try_from(code).unwrap_or(u32::MAX));
    match WebTransportError::new("", &options) {
        Ok(error) => error.into(),
        // A browser without the constructor: the stream still ends, with code 0.
        Err(_) => JsValue::UNDEFINED,
    }
}
