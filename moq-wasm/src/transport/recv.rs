//! The receiving half of a stream: a `ReadableStream` reader.

use std::task::Poll;

use bytes::Bytes;
use moqx_kio::Waiter;
use moqx_net::transport::{self, StreamError};
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{ReadableStream, ReadableStreamDefaultReader, ReadableStreamReadResult};

use super::error::{read_error, stream_error_with_code};
use super::promise::{PendingPromise, detach};

/// The receiving half of a WebTransport stream: one `read()` in flight at a time, each
/// chunk copied out of JavaScript memory into [`Bytes`].
#[derive(Debug)]
pub struct WebRecvStream {
    reader: ReadableStreamDefaultReader,
    read: PendingPromise,
    /// Read to its end, or stopped: nothing more comes, and dropping it changes nothing.
    ended: bool,
}

impl WebRecvStream {
    /// Takes the reader of `stream`.
    pub(crate) fn new(stream: &ReadableStream) -> Result<Self, StreamError> {
        let reader =
            ReadableStreamDefaultReader::new(stream).map_err(|error| read_error(&error))?;
        Ok(Self {
            reader,
            read: PendingPromise::default(),
            ended: false,
        })
    }
}

impl transport::RecvStream for WebRecvStream {
    fn poll_read(&mut self, waiter: &Waiter) -> Poll<Result<Option<Bytes>, StreamError>> {
        loop {
            let reader = &self.reader;
            let result = match std::task::ready!(self.read.poll(waiter, || reader.read())) {
                Ok(result) => result,
                Err(error) => {
                    self.ended = true;
                    return Poll::Ready(Err(read_error(&error)));
                }
            };
            match read_result(&result) {
                ReadChunk::End => {
                    self.ended = true;
                    return Poll::Ready(Ok(None));
                }
                ReadChunk::Bytes(bytes) if bytes.is_empty() => continue,
                ReadChunk::Bytes(bytes) => return Poll::Ready(Ok(Some(bytes))),
            }
        }
    }

    fn stop(&mut self, code: u64) {
        if !self.ended {
            self.ended = true;
            detach(
                self.reader
                    .cancel_with_reason(&stream_error_with_code(code)),
            );
        }
    }
}

impl Drop for WebRecvStream {
    fn drop(&mut self) {
        // Dropped before its end: the peer may stop sending.
        transport::RecvStream::stop(self, 0);
    }
}

/// One settled `read()`.
pub(crate) enum ReadChunk {
    /// `done: true`.
    End,
    /// A chunk (a `Uint8Array`), copied.
    Bytes(Bytes),
}

/// Decodes `{ done, value }` where `value` is a `Uint8Array`.
pub(crate) fn read_result(result: &JsValue) -> ReadChunk {
    let result: &ReadableStreamReadResult = result.unchecked_ref();
    if result.get_done().unwrap_or(false) {
        return ReadChunk::End;
    }
    match result.get_value().dyn_into::<js_sys::Uint8Array>() {
        Ok(array) => ReadChunk::Bytes(Bytes::from(array.to_vec())),
        // Not bytes: a browser bug; treated as an empty chunk.
        Err(_) => ReadChunk::Bytes(Bytes::new()),
    }
}

/// The value of a settled `read()` of a stream of objects (incoming streams), or `None` at
/// its end.
pub(crate) fn read_value(result: &JsValue) -> Option<JsValue> {
    let result: &ReadableStreamReadResult = result.unchecked_ref();
    if result.get_done().unwrap_or(false) {
        return None;
    }
    Some(result.get_value())
}
