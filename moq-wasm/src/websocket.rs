//! QMux over the browser's `WebSocket`: how a page reaches a relay where WebTransport is
//! missing or broken (every Safari: its flow-control window never refills; Firefox before
//! 153) or UDP is blocked. Each binary message is one QMux record's frames
//! (draft-lcurley-qmux-websocket); the QMux connection is `moqx_qmux`'s, the same state
//! machine the native drivers run.
//!
//! A page cannot send WebSocket Pings (the browser answers the relay's by itself), so
//! this side's keep-alive is QMux's own QX_PING.

use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use moqx_net::runtime::Instant;
use moqx_qmux::QmuxConnection;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{JsFuture, spawn_local};
use web_sys::{BinaryType, CloseEvent, MessageEvent, WebSocket};

/// Bytes the browser may hold unsent before this side stops handing it records: the
/// WebSocket API has no "writable" event, so the writer looks again after a moment.
const MOST_BUFFERED: u32 = 1 << 20;

/// How long the writer waits for the browser's buffer to drain below [`MOST_BUFFERED`].
const DRAIN_WAIT: Duration = Duration::from_millis(10);

/// An open WebSocket, closed when dropped unless handed on: a connection that lost the
/// race to WebTransport is not left open.
pub(crate) struct Opened {
    socket: Option<WebSocket>,
}

impl Opened {
    /// The subprotocol the server chose (`""`: none).
    pub(crate) fn protocol(&self) -> String {
        self.socket
            .as_ref()
            .map(WebSocket::protocol)
            .unwrap_or_default()
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        if let Some(socket) = self.socket.take() {
            let _ = socket.close();
        }
    }
}

/// Opens a WebSocket to `url` offering `protocols`; resolves once it is open, or with the
/// browser's (deliberately vague) reason.
pub(crate) async fn open(url: &str, protocols: &[String]) -> Result<Opened, String> {
    let offered = js_sys::Array::new();
    for protocol in protocols {
        offered.push(&JsValue::from_str(protocol));
    }
    let socket = WebSocket::new_with_str_sequence(url, &offered)
        .map_err(|error| crate::transport::message(&error))?;
    socket.set_binary_type(BinaryType::Arraybuffer);
    let mut opened = Opened {
        socket: Some(socket.clone()),
    };
    let ready = js_sys::Promise::new(&mut |resolve, reject| {
        socket.set_onopen(Some(&resolve));
        socket.set_onerror(Some(&reject));
        socket.set_onclose(Some(&reject));
    });
    let result = JsFuture::from(ready).await;
    socket.set_onopen(None);
    socket.set_onerror(None);
    socket.set_onclose(None);
    match result {
        Ok(_) => Ok(opened),
        Err(_) => {
            opened.socket = None;
            Err("the WebSocket did not open (nothing listening, the upgrade refused, or an untrusted certificate)".to_owned())
        }
    }
}

/// Carries `connection` over the open socket until either ends: messages in, records out,
/// and the connection's timer, each on a local task.
pub(crate) fn carry(mut opened: Opened, connection: QmuxConnection) {
    let Some(socket) = opened.socket.take() else {
        return;
    };
    let receiving = connection.clone();
    let on_message =
        Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| match event
            .data()
            .dyn_into::<js_sys::ArrayBuffer>(
        ) {
            Ok(buffer) => {
                let record = Bytes::from(js_sys::Uint8Array::new(&buffer).to_vec());
                receiving.handle_record(record, Instant::now());
            }
            Err(_) => receiving.with(|inner| {
                inner.handle_malformed(
                    "a text message (QMux over WebSocket allows binary ones only)",
                )
            }),
        });
    let ending = connection.clone();
    let on_close = Closure::<dyn FnMut(CloseEvent)>::new(move |event: CloseEvent| {
        let reason = format!(
            "the WebSocket closed (code {}{})",
            event.code(),
            match event.reason().as_str() {
                "" => String::new(),
                reason => format!(": {reason}"),
            }
        );
        ending.with(|inner| inner.handle_carrier_closed(&reason));
    });
    socket.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    socket.set_onclose(Some(on_close.as_ref().unchecked_ref()));
    spawn_local(run_timer(connection.clone()));
    spawn_local(async move {
        write(&socket, &connection).await;
        socket.set_onmessage(None);
        socket.set_onclose(None);
        // Normal closure: the QMux CONNECTION_CLOSE went before it, if there was one.
        let _ = socket.close_with_code(1000);
        drop((on_message, on_close));
    });
}

/// Hands the connection's records to the socket until the connection is gone.
async fn write(socket: &WebSocket, connection: &QmuxConnection) {
    loop {
        let record = poll_fn(|cx| match connection.poll_transmit(cx.waker()) {
            Some(record) => Poll::Ready(Some(record)),
            None if connection.closed().is_some() => Poll::Ready(None),
            None => Poll::Pending,
        })
        .await;
        let Some(record) = record else {
            return;
        };
        while socket.buffered_amount() > MOST_BUFFERED && socket.ready_state() == WebSocket::OPEN {
            gloo_timers::future::sleep(DRAIN_WAIT).await;
        }
        if socket.send_with_u8_array(&record).is_err() {
            connection.with(|inner| inner.handle_carrier_closed("the WebSocket took no more"));
            return;
        }
    }
}

/// The connection's timer: keep-alives and the idle timeout, until it is gone.
async fn run_timer(connection: QmuxConnection) {
    while let Some(at) = connection.timeout() {
        let now = Instant::now();
        if at > now {
            gloo_timers::future::sleep(at - now).await;
        }
        connection.on_timeout(Instant::now());
    }
}
