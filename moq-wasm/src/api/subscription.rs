//! `connection.subscribe(path, track)`: the frames of one track, as an async iterator.

use moq_net::model::{BroadcastConsumer, GroupConsumer, Origin, Path, TrackConsumer};
use moq_net::session::Session;
use wasm_bindgen::prelude::*;

use super::error::{from_moq, set};
use super::iterator::{Serial, Shared};
use super::race::or_closed;

/// The frames of a track, in order: `for await (const frame of subscription)`, each
/// `{ payload: Uint8Array, timestamp, group }` (`timestamp` in the track's timescale,
/// `group` the group's sequence number). Waits for the broadcast to be announced first.
/// Ends when the publisher ends the track; rejects with a `MoqError` if the session ends
/// or the subscription is refused.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Subscription {
    state: Shared<Reading>,
    serial: Serial,
    description: String,
}

/// Where the reading is.
#[derive(Debug)]
struct Reading {
    session: Session,
    origin: Origin,
    path: Path,
    track_name: String,
    track: Option<TrackConsumer>,
    group: Option<GroupConsumer>,
}

impl Subscription {
    pub(crate) fn new(session: Session, origin: Origin, path: &str, track: &str) -> Self {
        let reading = Reading {
            session,
            origin,
            path: Path::new(path),
            track_name: track.to_owned(),
            track: None,
            group: None,
        };
        Self {
            state: std::rc::Rc::new(std::cell::RefCell::new(Some(reading))),
            serial: Serial::default(),
            description: format!("{path}/{track}"),
        }
    }
}

#[wasm_bindgen]
impl Subscription {
    /// The next frame, as an iterator result `{ value, done }`.
    pub fn next(&self) -> js_sys::Promise {
        let state = self.state.clone();
        let description = self.description.clone();
        self.serial.next(move || async move {
            // Closed: the iterator is done.
            let Some(mut reading) = state.borrow_mut().take() else {
                return Ok(None);
            };
            let result = reading.next_frame().await;
            let done = matches!(result, Ok(None) | Err(_));
            if !done {
                *state.borrow_mut() = Some(reading);
            }
            result.map_err(|error| from_moq(error, &format!("reading {description}")))
        })
    }

    /// Stops reading: the subscription is cancelled once nothing else reads the track.
    pub fn close(&self) {
        self.state.borrow_mut().take();
    }
}

impl Reading {
    /// The next frame as a JavaScript object, `None` at the track's end.
    async fn next_frame(&mut self) -> Result<Option<JsValue>, moq_net::Error> {
        loop {
            if let Some(group) = &mut self.group {
                match group.read_frame().await {
                    Ok(Some(frame)) => {
                        let value = js_sys::Object::new();
                        let payload = js_sys::Uint8Array::from(&frame.payload[..]);
                        set(&value, "payload", &payload);
                        set(
                            &value,
                            "timestamp",
                            &JsValue::from_f64(frame.timestamp as f64),
                        );
                        set(&value, "group", &JsValue::from_f64(group.sequence() as f64));
                        return Ok(Some(value.into()));
                    }
                    // Ended, or cut short (too old, dropped upstream): on to the next group.
                    Ok(None) | Err(_) => self.group = None,
                }
            }
            let track = match &mut self.track {
                Some(track) => track,
                None => {
                    let broadcast =
                        or_closed(&self.session, announced(&self.origin, &self.path)).await?;
                    let track =
                        or_closed(&self.session, broadcast.subscribe_track(&self.track_name))
                            .await??;
                    self.track.insert(track)
                }
            };
            match or_closed(&self.session, track.next_group()).await? {
                Ok(Some(group)) => self.group = Some(group),
                Ok(None) => return Ok(None),
                Err(error) => return Err(error),
            }
        }
    }
}

/// The broadcast at `path`, once announced.
async fn announced(origin: &Origin, path: &Path) -> BroadcastConsumer {
    let mut announced = origin.announced(path.clone());
    loop {
        if let moq_net::model::Announcement::Active {
            path: active,
            broadcast,
        } = announced.next().await
        {
            if &active == path {
                return broadcast;
            }
        }
    }
}
