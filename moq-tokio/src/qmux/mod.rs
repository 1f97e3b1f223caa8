//! moq-lite over QMux on tokio: the carriers (a TCP byte stream, a WebSocket), the task
//! that drives each connection, the client side of `ws://` and `tcp://`, and a listener
//! serving them. The QMux protocol is `moqx_qmux`'s; the names and choices are
//! `moqx_runtime::qmux`'s.

mod carrier;
pub(crate) mod client;
mod driver;
mod listener;
mod upgrade;

pub use listener::{QmuxListener, QmuxServerConfig, accept_tls};
pub use upgrade::{UpgradeRefused, WebSocketUpgrade};

use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// The WebSocket limits: a message is one record, so none larger than the largest record
/// this side takes. Its buffers are sized for chat-sized records, not tungstenite's
/// defaults (128 KiB each way per connection: most of a chat connection's memory); the
/// driver flushes every turn, so a record waits in the write buffer only within a turn.
fn websocket_config() -> WebSocketConfig {
    let largest = moqx_qmux::Config::default().max_record_size as usize;
    WebSocketConfig::default()
        .max_message_size(Some(largest))
        .max_frame_size(Some(largest))
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(READ_BUFFER)
}

/// Bytes read from a carrier's socket at a time (and a WebSocket's read and write
/// buffers).
const READ_BUFFER: usize = 8 * 1024;
