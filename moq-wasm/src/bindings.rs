//! The browser's WebTransport API, declared for wasm-bindgen.
//!
//! Written here rather than taken from `web-sys` because `web-sys` gates its WebTransport
//! types behind the `web_sys_unstable_apis` cfg (a `RUSTFLAGS` setting every build of this
//! crate, and every crate depending on it, would need), and its generated types lag the
//! W3C text browsers implement: `streamErrorCode` as `u8` where the spec has
//! `unsigned long`, no `sendOrder` attribute on a send stream, no `protocols` option and no
//! `protocol` attribute. These declarations follow the W3C WebTransport specification
//! (<https://www.w3.org/TR/webtransport/>) for the members this driver uses; the stream
//! types they hand out are `web-sys`'s own `ReadableStream` and `WritableStream`.
//!
//! Dictionaries (options, close info, error options) are plain objects; their fields are
//! set with the declared setters on a fresh `Object`.

#![allow(missing_docs, unreachable_pub)] // declarations of the browser's API, documented there

use js_sys::{Object, Promise};
use wasm_bindgen::prelude::*;
use web_sys::{ReadableStream, WritableStream};

#[wasm_bindgen]
extern "C" {
    /// `WebTransport`: one session with a server.
    #[derive(Debug, Clone)]
    #[wasm_bindgen(extends = Object)]
    pub type WebTransport;

    #[wasm_bindgen(constructor, catch)]
    pub fn new(url: &str, options: &WebTransportOptions) -> Result<WebTransport, JsValue>;

    /// Resolves once the session is established; rejects if it cannot be.
    #[wasm_bindgen(method, getter)]
    pub fn ready(this: &WebTransport) -> Promise;

    /// Resolves with a `WebTransportCloseInfo` once the session is closed cleanly; rejects
    /// with a `WebTransportError` if it is lost.
    #[wasm_bindgen(method, getter)]
    pub fn closed(this: &WebTransport) -> Promise;

    /// The subprotocol the server selected from `protocols` (`""` if none).
    #[wasm_bindgen(method, getter)]
    pub fn protocol(this: &WebTransport) -> Option<String>;

    #[wasm_bindgen(method)]
    pub fn close(this: &WebTransport, info: &WebTransportCloseInfo);

    #[wasm_bindgen(method, getter)]
    pub fn datagrams(this: &WebTransport) -> WebTransportDatagramDuplexStream;

    /// Resolves with a `WebTransportBidirectionalStream`.
    #[wasm_bindgen(method, js_name = createBidirectionalStream)]
    pub fn create_bidirectional_stream(
        this: &WebTransport,
        options: &WebTransportSendStreamOptions,
    ) -> Promise;

    /// Resolves with a `WebTransportSendStream`.
    #[wasm_bindgen(method, js_name = createUnidirectionalStream)]
    pub fn create_unidirectional_stream(
        this: &WebTransport,
        options: &WebTransportSendStreamOptions,
    ) -> Promise;

    /// A stream of `WebTransportBidirectionalStream`s the server opened.
    #[wasm_bindgen(method, getter, js_name = incomingBidirectionalStreams)]
    pub fn incoming_bidirectional_streams(this: &WebTransport) -> ReadableStream;

    /// A stream of `WebTransportReceiveStream`s the server opened.
    #[wasm_bindgen(method, getter, js_name = incomingUnidirectionalStreams)]
    pub fn incoming_unidirectional_streams(this: &WebTransport) -> ReadableStream;

    /// Resolves with a `WebTransportConnectionStats`; throws where the browser has no
    /// `getStats` (Chromium 156 has none).
    #[wasm_bindgen(method, catch, js_name = getStats)]
    pub fn stats(this: &WebTransport) -> Result<Promise, JsValue>;

    /// `WebTransportOptions` (a dictionary).
    #[derive(Debug, Clone)]
    #[wasm_bindgen(extends = Object)]
    pub type WebTransportOptions;

    #[wasm_bindgen(method, setter, js_name = serverCertificateHashes)]
    pub fn set_server_certificate_hashes(this: &WebTransportOptions, hashes: &js_sys::Array);

    #[wasm_bindgen(method, setter)]
    pub fn set_protocols(this: &WebTransportOptions, protocols: &js_sys::Array);

    /// `WebTransportHash` (a dictionary): `{ algorithm: "sha-256", value }`.
    #[derive(Debug, Clone)]
    #[wasm_bindgen(extends = Object)]
    pub type WebTransportHash;

    #[wasm_bindgen(method, setter)]
    pub fn set_algorithm(this: &WebTransportHash, algorithm: &str);

    #[wasm_bindgen(method, setter)]
    pub fn set_value(this: &WebTransportHash, value: &js_sys::Uint8Array);

    /// `WebTransportCloseInfo` (a dictionary).
    #[derive(Debug, Clone)]
    #[wasm_bindgen(extends = Object)]
    pub type WebTransportCloseInfo;

    #[wasm_bindgen(method, getter, js_name = closeCode)]
    pub fn close_code(this: &WebTransportCloseInfo) -> Option<f64>;

    #[wasm_bindgen(method, setter, js_name = closeCode)]
    pub fn set_close_code(this: &WebTransportCloseInfo, code: u32);

    #[wasm_bindgen(method, getter)]
    pub fn reason(this: &WebTransportCloseInfo) -> Option<String>;

    #[wasm_bindgen(method, setter)]
    pub fn set_reason(this: &WebTransportCloseInfo, reason: &str);

    /// `WebTransportSendStreamOptions` (a dictionary).
    #[derive(Debug, Clone)]
    #[wasm_bindgen(extends = Object)]
    pub type WebTransportSendStreamOptions;

    #[wasm_bindgen(method, setter, js_name = sendOrder)]
    pub fn set_send_order(this: &WebTransportSendStreamOptions, order: f64);

    #[wasm_bindgen(method, setter, js_name = waitUntilAvailable)]
    pub fn set_wait_until_available(this: &WebTransportSendStreamOptions, wait: bool);

    /// `WebTransportSendStream`: a `WritableStream` with a place in the sending order.
    #[derive(Debug, Clone)]
    #[wasm_bindgen(extends = WritableStream, extends = Object)]
    pub type WebTransportSendStream;

    #[wasm_bindgen(method, setter, js_name = sendOrder)]
    pub fn set_send_order(this: &WebTransportSendStream, order: f64);

    /// `WebTransportBidirectionalStream`.
    #[derive(Debug, Clone)]
    #[wasm_bindgen(extends = Object)]
    pub type WebTransportBidirectionalStream;

    #[wasm_bindgen(method, getter)]
    pub fn readable(this: &WebTransportBidirectionalStream) -> ReadableStream;

    #[wasm_bindgen(method, getter)]
    pub fn writable(this: &WebTransportBidirectionalStream) -> WebTransportSendStream;

    /// `WebTransportDatagramDuplexStream`.
    #[derive(Debug, Clone)]
    #[wasm_bindgen(extends = Object)]
    pub type WebTransportDatagramDuplexStream;

    #[wasm_bindgen(method, getter)]
    pub fn readable(this: &WebTransportDatagramDuplexStream) -> ReadableStream;

    #[wasm_bindgen(method, getter)]
    pub fn writable(this: &WebTransportDatagramDuplexStream) -> WritableStream;

    #[wasm_bindgen(method, getter, js_name = maxDatagramSize)]
    pub fn max_datagram_size(this: &WebTransportDatagramDuplexStream) -> f64;

    /// `WebTransportError`: a `DOMException` with a source and, for a stream, a code.
    #[derive(Debug, Clone)]
    #[wasm_bindgen(extends = Object)]
    pub type WebTransportError;

    #[wasm_bindgen(constructor, catch)]
    pub fn new(
        message: &str,
        options: &WebTransportErrorOptions,
    ) -> Result<WebTransportError, JsValue>;

    /// `"stream"` or `"session"`.
    #[wasm_bindgen(method, getter)]
    pub fn source(this: &WebTransportError) -> Option<String>;

    #[wasm_bindgen(method, getter, js_name = streamErrorCode)]
    pub fn stream_error_code(this: &WebTransportError) -> Option<f64>;

    #[wasm_bindgen(method, getter)]
    pub fn message(this: &WebTransportError) -> Option<String>;

    /// `WebTransportErrorOptions` (a dictionary).
    #[derive(Debug, Clone)]
    #[wasm_bindgen(extends = Object)]
    pub type WebTransportErrorOptions;

    #[wasm_bindgen(method, setter, js_name = streamErrorCode)]
    pub fn set_stream_error_code(this: &WebTransportErrorOptions, code: u32);

    /// `WebTransportConnectionStats` (a dictionary); every member may be absent.
    #[derive(Debug, Clone)]
    #[wasm_bindgen(extends = Object)]
    pub type WebTransportConnectionStats;

    #[wasm_bindgen(method, getter, js_name = smoothedRtt)]
    pub fn smoothed_rtt(this: &WebTransportConnectionStats) -> Option<f64>;

    #[wasm_bindgen(method, getter, js_name = bytesSent)]
    pub fn bytes_sent(this: &WebTransportConnectionStats) -> Option<f64>;

    #[wasm_bindgen(method, getter, js_name = bytesReceived)]
    pub fn bytes_received(this: &WebTransportConnectionStats) -> Option<f64>;

    #[wasm_bindgen(method, getter, js_name = packetsLost)]
    pub fn packets_lost(this: &WebTransportConnectionStats) -> Option<f64>;

    #[wasm_bindgen(method, getter, js_name = estimatedSendRate)]
    pub fn estimated_send_rate(this: &WebTransportConnectionStats) -> Option<f64>;
}

/// A fresh, empty dictionary of type `T`.
pub fn dictionary<T: JsCast>() -> T {
    Object::new().unchecked_into()
}
