//! The sending half of a stream: a `WritableStream` writer.

use std::task::Poll;

use bytes::Bytes;
use moqx_kio::Waiter;
use moqx_net::transport::{self, StreamError, StreamPriority, TransportError};
use web_sys::WritableStreamDefaultWriter;

use super::error::{stream_error_with_code, write_error};
use super::promise::{PendingPromise, detach};
use crate::bindings::WebTransportSendStream;

/// The `sendOrder` of a stream that never gets a priority (a control stream): ahead of
/// every group stream, as the transport traits ask. The largest integer a JavaScript
/// number holds exactly.
pub(crate) const CONTROL_SEND_ORDER: f64 = 9_007_199_254_740_991.0;

/// The sending half of a WebTransport stream.
///
/// Writes are copied into a JavaScript `Uint8Array` and queued on the stream's writer; the
/// writer's `desiredSize` and `ready` are the backpressure. A write's failure shows on the
/// writer (its `ready` and `closed` reject), so the promises of single writes are not
/// awaited.
#[derive(Debug)]
pub struct WebSendStream {
    stream: WebTransportSendStream,
    writer: WritableStreamDefaultWriter,
    /// `writer.ready`, while a write waits for room.
    ready: PendingPromise,
    /// `writer.closed`, polled for STOP_SENDING (it rejects with the peer's code).
    closed: PendingPromise,
    /// The error the stream ended with, once seen.
    failed: Option<StreamError>,
    /// Finished or reset: nothing more is sent, and dropping it changes nothing.
    ended: bool,
    /// `writer.closed` resolved: everything sent, and the peer can no longer stop it.
    delivered: bool,
}

impl WebSendStream {
    /// Takes the writer of `stream`.
    pub(crate) fn new(stream: WebTransportSendStream) -> Result<Self, StreamError> {
        let writer = stream.get_writer().map_err(|error| write_error(&error))?;
        Ok(Self {
            stream,
            writer,
            ready: PendingPromise::default(),
            closed: PendingPromise::default(),
            failed: None,
            ended: false,
            delivered: false,
        })
    }
}

impl transport::SendStream for WebSendStream {
    fn poll_write(&mut self, waiter: &Waiter, data: &mut Bytes) -> Poll<Result<(), StreamError>> {
        loop {
            if let Some(error) = &self.failed {
                return Poll::Ready(Err(error.clone()));
            }
            if data.is_empty() {
                return Poll::Ready(Ok(()));
            }
            match self.writer.desired_size() {
                Ok(Some(room)) if room > 0.0 => {
                    let chunk = js_sys::Uint8Array::from(&data[..]);
                    detach(self.writer.write_with_chunk(&chunk));
                    data.clear();
                    return Poll::Ready(Ok(()));
                }
                // Full: wait for room.
                Ok(Some(_)) => {
                    let writer = &self.writer;
                    match self.ready.poll(waiter, || writer.ready()) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Ok(_)) => continue,
                        Poll::Ready(Err(error)) => self.failed = Some(write_error(&error)),
                    }
                }
                // Errored (`null`), or the writer was released: the reason is on `closed`.
                Ok(None) | Err(_) => {
                    let writer = &self.writer;
                    match self.closed.poll(waiter, || writer.closed()) {
                        Poll::Pending => return Poll::Pending,
                        // Closed (after a finish): nothing more can be written.
                        Poll::Ready(Ok(_)) => {
                            self.delivered = true;
                            self.failed = Some(StreamError::Connection(TransportError::Lost(
                                "write after the stream finished".into(),
                            )));
                        }
                        Poll::Ready(Err(error)) => self.failed = Some(write_error(&error)),
                    }
                }
            }
        }
    }

    fn finish(&mut self) -> Result<(), StreamError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        if !self.ended {
            self.ended = true;
            detach(self.writer.close());
        }
        Ok(())
    }

    fn reset(&mut self, code: u64) {
        if !self.ended {
            self.ended = true;
            detach(self.writer.abort_with_reason(&stream_error_with_code(code)));
        }
    }

    fn set_priority(&mut self, priority: StreamPriority) {
        self.stream.set_send_order(send_order(priority));
    }

    fn poll_stopped(&mut self, waiter: &Waiter) -> Poll<Result<u64, StreamError>> {
        // The peer has it all and will never stop it.
        if self.delivered {
            return Poll::Pending;
        }
        if let Some(error) = &self.failed {
            return Poll::Ready(match error {
                StreamError::Stopped(code) => Ok(*code),
                other => Err(other.clone()),
            });
        }
        let writer = &self.writer;
        match self.closed.poll(waiter, || writer.closed()) {
            Poll::Pending => Poll::Pending,
            // Closed after a finish: the peer has it all and will never stop it.
            Poll::Ready(Ok(_)) => {
                self.delivered = true;
                Poll::Pending
            }
            Poll::Ready(Err(error)) => {
                let error = write_error(&error);
                self.failed = Some(error.clone());
                Poll::Ready(match error {
                    StreamError::Stopped(code) => Ok(code),
                    other => Err(other),
                })
            }
        }
    }
}

impl Drop for WebSendStream {
    fn drop(&mut self) {
        // Dropped unfinished: the peer must not wait for the rest.
        transport::SendStream::reset(self, 0);
    }
}

/// A [`StreamPriority`] as a `sendOrder` (a greater one is sent first): the subscriber's
/// priority above the group's sequence number, both kept in the 53 bits a JavaScript
/// number holds exactly, and every one of them below [`CONTROL_SEND_ORDER`].
pub(crate) fn send_order(priority: StreamPriority) -> f64 {
    const GROUP_BITS: u32 = 44;
    let group = priority.group.min((1 << GROUP_BITS) - 1);
    ((u64::from(priority.subscriber) << GROUP_BITS) | group) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_order_keeps_the_priority_order_below_control_streams() {
        let priorities = [
            StreamPriority {
                subscriber: 0,
                group: 0,
            },
            StreamPriority {
                subscriber: 0,
                group: 1,
            },
            StreamPriority {
                subscriber: 0,
                group: u64::MAX,
            },
            StreamPriority {
                subscriber: 1,
                group: 0,
            },
            StreamPriority {
                subscriber: 255,
                group: 7,
            },
            StreamPriority {
                subscriber: 255,
                group: u64::MAX,
            },
        ];
        for pair in priorities.windows(2) {
            assert!(send_order(pair[0]) < send_order(pair[1]), "{pair:?}");
        }
        let highest = send_order(priorities[priorities.len() - 1]);
        assert!(highest < CONTROL_SEND_ORDER);
        assert_eq!(highest, highest.trunc(), "an exact integer");
    }
}
