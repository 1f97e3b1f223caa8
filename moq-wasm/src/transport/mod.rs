//! `moqx_net::transport` over the browser's `WebTransport`.
//!
//! Each poll method keeps at most one of the browser's promises in flight (an accept's
//! `read()`, an open's `create…Stream()`, the session's `closed`) and polls it with the
//! caller's waker. Everything here is `!Send`, as the browser's objects are: the session
//! machine that owns it runs on the page's event loop.

mod error;
mod promise;
mod recv;
mod send;

use std::cell::Cell;
use std::rc::Rc;
use std::task::Poll;

use bytes::Bytes;
use moqx_kio::Waiter;
use moqx_net::transport::{self, StreamError, TransportError, TransportStats};
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{ReadableStreamDefaultReader, WritableStreamDefaultWriter};

pub use recv::WebRecvStream;
pub use send::WebSendStream;

pub(crate) use error::message;

use crate::bindings::{
    WebTransport, WebTransportBidirectionalStream, WebTransportCloseInfo,
    WebTransportConnectionStats, WebTransportSendStreamOptions, dictionary,
};
use promise::{PendingPromise, detach};
use recv::{ReadChunk, read_result, read_value};
use send::CONTROL_SEND_ORDER;

/// A WebTransport session, as the session machine sees a connection.
#[derive(Debug)]
pub struct WebTransportSession {
    transport: WebTransport,
    /// The subprotocol the server selected (`wt-protocol`), if any.
    protocol: Option<String>,
    incoming_uni: Incoming,
    incoming_bidi: Incoming,
    open_uni: PendingPromise,
    open_bidi: PendingPromise,
    datagrams_in: Incoming,
    datagrams_out: Option<WritableStreamDefaultWriter>,
    max_datagram_size: Option<usize>,
    /// `transport.closed`.
    closed: PendingPromise,
    /// How the session ended, once known.
    ended: Option<TransportError>,
    /// This side's close, if it closed first: the end is then reported as its own.
    closed_here: Option<(u64, String)>,
    /// The last `getStats()` result, refreshed in the background on each [`stats`] call.
    ///
    /// [`stats`]: transport::Session::stats
    stats: Rc<Cell<TransportStats>>,
    /// A `getStats()` is in flight (or the browser has none).
    stats_pending: Rc<Cell<bool>>,
}

impl WebTransportSession {
    /// Wraps a `WebTransport` whose `ready` has resolved.
    pub(crate) fn new(transport: WebTransport) -> Result<Self, TransportError> {
        let lost = |error: JsValue| TransportError::Lost(message(&error));
        let incoming_uni =
            Incoming::new(&transport.incoming_unidirectional_streams()).map_err(lost)?;
        let incoming_bidi =
            Incoming::new(&transport.incoming_bidirectional_streams()).map_err(lost)?;
        let datagrams = transport.datagrams();
        let datagrams_in = Incoming::new(&datagrams.readable()).map_err(lost)?;
        let datagrams_out = datagrams.writable().get_writer().ok();
        let max_datagram_size = Some(datagrams.max_datagram_size())
            .filter(|size| size.is_finite() && *size > 0.0)
            .map(|size| size as usize);
        let protocol = transport.protocol().filter(|protocol| !protocol.is_empty());
        Ok(Self {
            transport,
            protocol,
            incoming_uni,
            incoming_bidi,
            open_uni: PendingPromise::default(),
            open_bidi: PendingPromise::default(),
            datagrams_in,
            datagrams_out,
            max_datagram_size,
            closed: PendingPromise::default(),
            ended: None,
            closed_here: None,
            stats: Rc::default(),
            stats_pending: Rc::default(),
        })
    }

    /// The options of every stream this side opens: control streams go first (a group
    /// stream is moved down by its priority), and an open waits for the peer's credit
    /// instead of failing.
    fn stream_options() -> WebTransportSendStreamOptions {
        let options: WebTransportSendStreamOptions = dictionary();
        options.set_send_order(CONTROL_SEND_ORDER);
        options.set_wait_until_available(true);
        options
    }

    fn lost(&self, error: &JsValue) -> TransportError {
        self.ended
            .clone()
            .unwrap_or_else(|| TransportError::Lost(message(error)))
    }
}

impl transport::Session for WebTransportSession {
    type SendStream = WebSendStream;
    type RecvStream = WebRecvStream;

    fn poll_open_uni(&mut self, waiter: &Waiter) -> Poll<Result<WebSendStream, TransportError>> {
        let transport = &self.transport;
        let opened = std::task::ready!(self.open_uni.poll(waiter, || {
            transport.create_unidirectional_stream(&Self::stream_options())
        }));
        Poll::Ready(match opened {
            Ok(stream) => WebSendStream::new(stream.unchecked_into()).map_err(connection_error),
            Err(error) => Err(self.lost(&error)),
        })
    }

    fn poll_open_bidi(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<(WebSendStream, WebRecvStream), TransportError>> {
        let transport = &self.transport;
        let opened = std::task::ready!(self.open_bidi.poll(waiter, || {
            transport.create_bidirectional_stream(&Self::stream_options())
        }));
        Poll::Ready(match opened {
            Ok(stream) => bidi(stream.unchecked_into()),
            Err(error) => Err(self.lost(&error)),
        })
    }

    fn poll_accept_uni(&mut self, waiter: &Waiter) -> Poll<Result<WebRecvStream, TransportError>> {
        let stream = std::task::ready!(self.incoming_uni.poll_next(waiter));
        Poll::Ready(match stream {
            Ok(stream) => WebRecvStream::new(stream.unchecked_ref()).map_err(connection_error),
            Err(error) => Err(self.lost(&error)),
        })
    }

    fn poll_accept_bidi(
        &mut self,
        waiter: &Waiter,
    ) -> Poll<Result<(WebSendStream, WebRecvStream), TransportError>> {
        let stream = std::task::ready!(self.incoming_bidi.poll_next(waiter));
        Poll::Ready(match stream {
            Ok(stream) => bidi(stream.unchecked_into()),
            Err(error) => Err(self.lost(&error)),
        })
    }

    fn send_datagram(&mut self, payload: Bytes) -> Result<(), TransportError> {
        if let Some(error) = &self.ended {
            return Err(error.clone());
        }
        let Some(writer) = &self.datagrams_out else {
            return Ok(()); // no datagrams on this session: dropped, as unreliable ones may be
        };
        // No room (or errored): dropped, as a datagram that does not fit is.
        if writer
            .desired_size()
            .ok()
            .flatten()
            .is_some_and(|room| room > 0.0)
        {
            detach(writer.write_with_chunk(&js_sys::Uint8Array::from(&payload[..])));
        }
        Ok(())
    }

    fn poll_recv_datagram(&mut self, waiter: &Waiter) -> Poll<Result<Bytes, TransportError>> {
        loop {
            let datagram = std::task::ready!(self.datagrams_in.poll_next_raw(waiter));
            return Poll::Ready(match datagram {
                Ok(result) => match read_result(&result) {
                    ReadChunk::Bytes(bytes) => Ok(bytes),
                    ReadChunk::End => {
                        self.datagrams_in.dead = true;
                        continue;
                    }
                },
                Err(error) => Err(self.lost(&error)),
            });
        }
    }

    fn max_datagram_size(&self) -> Option<usize> {
        self.max_datagram_size
    }

    fn close(&mut self, code: u64, reason: &str) {
        if self.closed_here.is_some() || self.ended.is_some() {
            return;
        }
        self.closed_here = Some((code, reason.to_owned()));
        let info: WebTransportCloseInfo = dictionary();
        // WebTransport close codes are 32 bits (moq-lite's are small); a larger one saturates.
        info.set_close_code(u32::try_from(code).unwrap_or(u32::MAX));
        info.set_reason(reason);
        self.transport.close(&info);
    }

    fn poll_closed(&mut self, waiter: &Waiter) -> Poll<TransportError> {
        if let Some(error) = &self.ended {
            return Poll::Ready(error.clone());
        }
        let transport = &self.transport;
        let outcome = std::task::ready!(self.closed.poll(waiter, || transport.closed()));
        let error = match (&self.closed_here, outcome) {
            (Some((code, reason)), _) => TransportError::Closed {
                code: *code,
                reason: reason.clone(),
                remote: false,
            },
            (None, Ok(info)) => {
                let info: WebTransportCloseInfo = info.unchecked_into();
                TransportError::Closed {
                    code: info.close_code().map_or(0, |code| code as u64),
                    reason: info.reason().unwrap_or_default(),
                    remote: true,
                }
            }
            (None, Err(error)) => TransportError::Lost(message(&error)),
        };
        tracing::debug!(%error, "the WebTransport session ended");
        self.ended = Some(error.clone());
        Poll::Ready(error)
    }

    fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    fn stats(&self) -> TransportStats {
        if !self.stats_pending.replace(true) {
            let (stats, pending) = (self.stats.clone(), self.stats_pending.clone());
            // A browser without `getStats` keeps `stats_pending` set: never asked again.
            let Ok(promise) = self.transport.stats() else {
                return self.stats.get();
            };
            wasm_bindgen_futures::spawn_local(async move {
                if let Ok(value) = wasm_bindgen_futures::JsFuture::from(promise).await {
                    stats.set(transport_stats(value.unchecked_ref()));
                }
                pending.set(false);
            });
        }
        self.stats.get()
    }
}

impl Drop for WebTransportSession {
    fn drop(&mut self) {
        // The machine closes before it ends; a session dropped otherwise is closed here,
        // so the relay does not wait for an idle timeout.
        if self.ended.is_none() && self.closed_here.is_none() {
            self.transport.close(&dictionary());
        }
    }
}

/// A stream of things the browser hands over (incoming streams, datagrams) read one at a
/// time. After its end or an error it stays pending: the session's `closed` says why.
#[derive(Debug)]
struct Incoming {
    reader: ReadableStreamDefaultReader,
    read: PendingPromise,
    dead: bool,
}

impl Incoming {
    fn new(stream: &web_sys::ReadableStream) -> Result<Self, JsValue> {
        Ok(Self {
            reader: ReadableStreamDefaultReader::new(stream)?,
            read: PendingPromise::default(),
            dead: false,
        })
    }

    /// The next value (`Err` once, when the stream fails; pending after its end).
    fn poll_next(&mut self, waiter: &Waiter) -> Poll<Result<JsValue, JsValue>> {
        loop {
            match std::task::ready!(self.poll_next_raw(waiter)) {
                Ok(result) => match read_value(&result) {
                    Some(value) => return Poll::Ready(Ok(value)),
                    None => self.dead = true,
                },
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }

    /// The next settled `read()` as it is.
    fn poll_next_raw(&mut self, waiter: &Waiter) -> Poll<Result<JsValue, JsValue>> {
        // Ended or failed: a machine polling again in the same turn must not spin; the
        // session's `closed` wakes it.
        if self.dead {
            return Poll::Pending;
        }
        let reader = &self.reader;
        let result = std::task::ready!(self.read.poll(waiter, || reader.read()));
        if result.is_err() {
            self.dead = true;
        }
        Poll::Ready(result)
    }
}

fn bidi(
    stream: WebTransportBidirectionalStream,
) -> Result<(WebSendStream, WebRecvStream), TransportError> {
    let send = WebSendStream::new(stream.writable()).map_err(connection_error)?;
    let recv = WebRecvStream::new(&stream.readable()).map_err(connection_error)?;
    Ok((send, recv))
}

/// A stream that fails as it is set up fails with its connection.
fn connection_error(error: StreamError) -> TransportError {
    match error {
        StreamError::Connection(error) => error,
        other => TransportError::Lost(other.to_string()),
    }
}

fn transport_stats(stats: &WebTransportConnectionStats) -> TransportStats {
    let count = |value: Option<f64>| value.map_or(0, |value| value as u64);
    TransportStats {
        rtt: stats
            .smoothed_rtt()
            .filter(|rtt| rtt.is_finite() && *rtt >= 0.0)
            .map(|millis| std::time::Duration::from_secs_f64(millis / 1000.0)),
        bytes_sent: count(stats.bytes_sent()),
        bytes_received: count(stats.bytes_received()),
        packets_lost: count(stats.packets_lost()),
        estimated_bitrate: stats.estimated_send_rate().map(|rate| rate as u64),
        // The browser does not say when its connection's path changes.
        peer_migrations: 0,
        path_fallbacks: 0,
    }
}
