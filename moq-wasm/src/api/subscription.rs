//! `connection.subscribe(path, track)`: the frames of one track, as an async iterator.

use moqx_net::model::{BroadcastConsumer, FollowedTrack, Origin, Path, TrackFrames};
use moqx_net::session::Session;
use wasm_bindgen::prelude::*;

use super::error::{from_moq, set};
use super::iterator::{Serial, Shared};
use super::link::{Link, or_closed};

/// The frames of a track, in order: `for await (const frame of subscription)`, each
/// `{ payload: Uint8Array, timestamp, group }` (`timestamp` in the track's timescale,
/// `group` the group's sequence number). Waits for the broadcast to be announced first.
/// Ends when the publisher ends the track; rejects with a `MoqError` if the session ends
/// or the subscription is refused. With `reconnect`, a session lost does not end it: it
/// carries on on the next session, from the first group missed where the publisher has a
/// hop id (a reconnecting client's does), else from the latest.
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
    link: Link,
    origin: Origin,
    path: Path,
    track_name: String,
    frames: Option<TrackFrames>,
    /// The session up when the track was subscribed (kept-up links): a track that fails
    /// once that session has ended is followed again on the next.
    subscribed_on: Option<Session>,
}

impl Subscription {
    pub(crate) fn new(link: Link, origin: Origin, path: &str, track: &str) -> Self {
        let reading = Reading {
            link,
            origin,
            path: Path::new(path),
            track_name: track.to_owned(),
            frames: None,
            subscribed_on: None,
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
    /// The next frame as a JavaScript object, `None` at the track's end. Frames come as
    /// they arrive from every group open (`TrackFrames`): a group whose end is late
    /// (a browser publisher's FIN comes in a packet of its own) never holds the next.
    async fn next_frame(&mut self) -> Result<Option<JsValue>, moqx_net::Error> {
        loop {
            let frames = match &mut self.frames {
                Some(frames) => frames,
                None => match self.subscribe().await? {
                    Ok(track) => self.frames.insert(TrackFrames::new(track)),
                    Err(error) if self.lost_with_its_session() => {
                        tracing::debug!(path = %self.path, %error, "the subscription failed with its session; following on the next");
                        continue;
                    }
                    Err(error) => return Err(error),
                },
            };
            match or_closed(&self.link, frames.read_frame()).await? {
                Ok(Some((group, frame))) => {
                    let value = js_sys::Object::new();
                    let payload = js_sys::Uint8Array::from(&frame.payload[..]);
                    set(&value, "payload", &payload);
                    set(
                        &value,
                        "timestamp",
                        &JsValue::from_f64(frame.timestamp as f64),
                    );
                    set(&value, "group", &JsValue::from_f64(group as f64));
                    return Ok(Some(value.into()));
                }
                Ok(None) => return Ok(None),
                Err(error) if self.lost_with_its_session() => {
                    tracing::debug!(path = %self.path, %error, "the track ended with its session; following on the next");
                    self.frames = None;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Subscribes to the track: once its broadcast is announced on a session, or (kept
    /// up) followed across sessions. The outer error: the connection ended.
    async fn subscribe(
        &mut self,
    ) -> Result<Result<FollowedTrack, moqx_net::Error>, moqx_net::Error> {
        if !self.link.keeps_up() {
            let broadcast = or_closed(&self.link, announced(&self.origin, &self.path)).await?;
            let track = or_closed(&self.link, broadcast.subscribe_track(&self.track_name)).await?;
            return Ok(track.map(FollowedTrack::fixed));
        }
        // On a session that is up: a track subscribed while none is would have nothing to
        // tell a failure of its own from a session lost.
        let Some(connected) = or_closed(&self.link, self.link.connected()).await? else {
            return Err(moqx_net::Error::Cancel);
        };
        self.subscribed_on = Some(connected.session);
        or_closed(
            &self.link,
            self.origin
                .follow_track(self.path.clone(), &self.track_name),
        )
        .await
    }

    /// Whether the track failed because the session it was subscribed on ended (and the
    /// connection goes on): it is then followed again on the next session.
    fn lost_with_its_session(&self) -> bool {
        self.link.keeps_up() && self.subscribed_on.as_ref().is_some_and(Session::is_closed)
    }
}

/// The broadcast at `path`, once announced.
async fn announced(origin: &Origin, path: &Path) -> BroadcastConsumer {
    let mut announced = origin.announced(path.clone());
    loop {
        if let moqx_net::model::Announcement::Active {
            path: active,
            broadcast,
        } = announced.next().await
            && &active == path
        {
            return broadcast;
        }
    }
}
