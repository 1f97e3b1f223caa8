//! The peer's side of a request stream that this side reads only for its end (18's
//! streams of one request each, and 16's SUBSCRIBE_NAMESPACE): what else comes there
//! (REQUEST_UPDATE, a late reply) is handed over to be logged or checked, not applied.

use std::task::Poll;

use moqx_kio::Waiter;

use crate::Error;
use crate::moqt::{Draft, Frame};
use crate::session::stream::{ReadError, Reader};
use crate::transport::RecvStream;

/// How the peer's side of a request stream ended.
pub(super) enum StreamEnd {
    /// Its FIN: nothing more will come, the request stands.
    Finished,
    /// Reset or stopped, or the connection went away: the request is withdrawn.
    Reset,
    /// Bytes that do not decode, or a message `on_message` refused: fatal to the session.
    Malformed(Error),
}

/// Reads every message ready on `reader`, handing each to `on_message`; ready once the
/// stream ended (or a message was refused), pending while it may carry more.
pub(super) fn poll_until_end<R: RecvStream>(
    reader: &mut Reader<R>,
    waiter: &Waiter,
    draft: Draft,
    mut on_message: impl FnMut(Frame) -> Result<(), Error>,
) -> Poll<StreamEnd> {
    loop {
        match reader.poll_message(waiter, |buf| Frame::decode(buf, draft)) {
            Poll::Ready(Ok(Some(frame))) => {
                if let Err(error) = on_message(frame) {
                    return Poll::Ready(StreamEnd::Malformed(error));
                }
            }
            Poll::Ready(Ok(None)) => return Poll::Ready(StreamEnd::Finished),
            Poll::Ready(Err(ReadError::Stream(_))) => return Poll::Ready(StreamEnd::Reset),
            Poll::Ready(Err(ReadError::Malformed(error))) => {
                return Poll::Ready(StreamEnd::Malformed(error));
            }
            Poll::Pending => return Poll::Pending,
        }
    }
}
