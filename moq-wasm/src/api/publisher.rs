//! `connection.publish(path, track)`: a broadcast with one track, written message by message.

use std::cell::RefCell;

use bytes::Bytes;
use moqx_net::model::{BroadcastProducer, TrackProducer};
use wasm_bindgen::prelude::*;

/// A broadcast this page publishes, with one track. Each [`write`](Publisher::write) is a
/// group of one frame: a subscriber joining late starts at the latest message, and a
/// message that is lost never holds up the next (chat's shape).
///
/// The broadcast is announced until [`close`](Publisher::close) (or until the object is
/// freed).
#[wasm_bindgen]
#[derive(Debug)]
pub struct Publisher {
    /// Announced while it lives.
    broadcast: RefCell<Option<BroadcastProducer>>,
    track: RefCell<Option<TrackProducer>>,
    path: String,
}

impl Publisher {
    pub(crate) fn new(broadcast: BroadcastProducer, track: TrackProducer, path: String) -> Self {
        Self {
            broadcast: RefCell::new(Some(broadcast)),
            track: RefCell::new(Some(track)),
            path,
        }
    }
}

#[wasm_bindgen]
impl Publisher {
    /// Sends `payload` as the next group, one frame stamped `timestamp` (in the track's
    /// timescale, microseconds; default 0). Returns the group's sequence number.
    pub fn write(&self, payload: &[u8], timestamp: Option<f64>) -> Result<f64, JsValue> {
        let mut track = self.track.borrow_mut();
        let Some(track) = track.as_mut() else {
            return Err(super::error::from_moq(
                moqx_net::Error::Closed,
                &format!("writing to {}", self.path),
            ));
        };
        let timestamp = timestamp
            .filter(|t| t.is_finite() && *t >= 0.0)
            .unwrap_or(0.0);
        let sequence = track.write_group(timestamp as u64, Bytes::copy_from_slice(payload));
        Ok(sequence as f64)
    }

    /// The broadcast's path, relative to the connection's root.
    #[wasm_bindgen(getter)]
    pub fn path(&self) -> String {
        self.path.clone()
    }

    /// Ends the track and withdraws the broadcast. Idempotent.
    pub fn close(&self) {
        if let Some(track) = self.track.borrow_mut().take() {
            track.finish();
        }
        self.broadcast.borrow_mut().take();
    }
}
