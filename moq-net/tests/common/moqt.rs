//! A hand-driven moq-transport peer's streams, for the tests that check what each draft
//! puts on the wire: a control stream (14, 16: one bidi stream; 18: this side's uni stream
//! out and the relay's in), or a request stream of its own (18).

use std::task::{Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use moqx_kio::Waiter;
use moqx_net::moqt::{ClientSetup, Control, Draft, Frame};
use moqx_net::runtime::test::{TestRecvStream, TestRuntime, TestSendStream, TestTransport};
use moqx_net::transport::{RecvStream, SendStream, Session as _};

/// One stream of a raw peer: what it sends, and what it received and has not read yet.
pub(crate) struct RawStream {
    pub(crate) send: TestSendStream,
    /// `None` for 18's control stream until the relay's uni stream is accepted.
    pub(crate) recv: Option<TestRecvStream>,
    received: Vec<u8>,
    pub(crate) draft: Draft,
}

impl RawStream {
    /// A stream of `send` and `recv`.
    pub(crate) fn new(send: TestSendStream, recv: Option<TestRecvStream>, draft: Draft) -> Self {
        Self {
            send,
            recv,
            received: Vec::new(),
            draft,
        }
    }

    /// Opens the draft's control stream and writes `setup` on it.
    pub(crate) fn open_control(raw: &mut TestTransport, draft: Draft, setup: &ClientSetup) -> Self {
        let waiter = Waiter::new(Waker::noop());
        let mut control = if draft == Draft::D18 {
            let Poll::Ready(Ok(send)) = raw.poll_open_uni(&waiter) else {
                panic!("the test transport opens at once");
            };
            Self::new(send, None, draft)
        } else {
            Self::open_request(raw, draft)
        };
        control.write(setup.to_vec(draft).unwrap());
        control
    }

    /// Opens a bidirectional stream.
    pub(crate) fn open_request(raw: &mut TestTransport, draft: Draft) -> Self {
        let waiter = Waiter::new(Waker::noop());
        let Poll::Ready(Ok((send, recv))) = raw.poll_open_bidi(&waiter) else {
            panic!("the test transport opens at once");
        };
        Self::new(send, Some(recv), draft)
    }

    /// Writes `bytes`.
    pub(crate) fn write(&mut self, bytes: Vec<u8>) {
        let waiter = Waiter::new(Waker::noop());
        let _ = self.send.poll_write(&waiter, &mut Bytes::from(bytes));
    }

    /// Writes `message`.
    pub(crate) fn send<C: Control>(&mut self, message: &C) {
        self.write(message.to_vec(self.draft).unwrap());
    }

    /// The next message on it (on 18's control stream, accepting the relay's uni stream
    /// first), within a second.
    pub(crate) fn next(&mut self, runtime: &TestRuntime, raw: &mut TestTransport) -> Option<Frame> {
        let waiter = Waiter::new(Waker::noop());
        let mut frame = None;
        runtime.run_until(Duration::from_secs(1), || {
            if self.recv.is_none()
                && let Poll::Ready(Ok(recv)) = raw.poll_accept_uni(&waiter)
            {
                self.recv = Some(recv);
            }
            if let Some(recv) = self.recv.as_mut() {
                while let Poll::Ready(Ok(Some(chunk))) = recv.poll_read(&waiter) {
                    self.received.extend_from_slice(&chunk);
                }
            }
            let mut cursor = &self.received[..];
            if let Ok(decoded) = Frame::decode(&mut cursor, self.draft) {
                let used = self.received.len() - cursor.len();
                self.received.drain(..used);
                frame = Some(decoded);
                return true;
            }
            false
        });
        frame
    }

    /// Whether the relay ends its side of the stream (its FIN) within a second, with
    /// nothing more on it.
    pub(crate) fn ended(&mut self, runtime: &TestRuntime) -> bool {
        let waiter = Waiter::new(Waker::noop());
        let mut ended = false;
        runtime.run_until(Duration::from_secs(1), || {
            let Some(recv) = self.recv.as_mut() else {
                return false;
            };
            loop {
                match recv.poll_read(&waiter) {
                    Poll::Ready(Ok(Some(chunk))) => self.received.extend_from_slice(&chunk),
                    Poll::Ready(Ok(None)) => {
                        ended = true;
                        return true;
                    }
                    _ => return false,
                }
            }
        });
        ended && self.received.is_empty()
    }
}
