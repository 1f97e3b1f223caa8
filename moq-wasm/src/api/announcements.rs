//! `connection.announced(prefix)`: broadcasts coming and going, as an async iterator.

use moqx_net::model::{Announced, Announcement};
use wasm_bindgen::prelude::*;

use super::error::{from_moq, set};
use super::iterator::{Serial, Shared};
use super::link::{Link, or_closed};

/// The broadcasts under a prefix as they come and go: `for await (const change of
/// announcements)`, each `{ path, active }` (`active: false` when the broadcast is gone),
/// starting with those already live. Rejects with a `MoqError` when the session ends
/// (with `reconnect`: when the connection is closed; the broadcasts of a session lost
/// end, and come back active on the next).
#[wasm_bindgen]
#[derive(Debug)]
pub struct Announcements {
    state: Shared<(Link, Announced)>,
    serial: Serial,
}

impl Announcements {
    pub(crate) fn new(link: Link, announced: Announced) -> Self {
        Self {
            state: std::rc::Rc::new(std::cell::RefCell::new(Some((link, announced)))),
            serial: Serial::default(),
        }
    }
}

#[wasm_bindgen]
impl Announcements {
    /// The next change, as an iterator result `{ value, done }`.
    pub fn next(&self) -> js_sys::Promise {
        let state = self.state.clone();
        self.serial.next(move || async move {
            let Some((link, mut announced)) = state.borrow_mut().take() else {
                return Ok(None);
            };
            let change = or_closed(&link, announced.next()).await;
            let change = change.map_err(|error| from_moq(error, "following announcements"))?;
            *state.borrow_mut() = Some((link, announced));
            let (path, active) = match change {
                Announcement::Active { path, .. } => (path, true),
                Announcement::Ended { path } => (path, false),
            };
            let value = js_sys::Object::new();
            set(&value, "path", &JsValue::from_str(path.as_str()));
            set(&value, "active", &JsValue::from_bool(active));
            Ok(Some(value.into()))
        })
    }

    /// Stops following.
    pub fn close(&self) {
        self.state.borrow_mut().take();
    }
}
