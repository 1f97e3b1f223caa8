//! The JavaScript API (wasm-bindgen): what a page imports from the generated module.
//!
//! ```js
//! import init, { Connection } from "./pkg/moq_wasm.js";
//! await init();
//! const fingerprint = await (await fetch("http://127.0.0.1:4443/certificate.sha256")).text();
//! const connection = await Connection.connect("https://127.0.0.1:4443/room", fingerprint);
//! const me = connection.publish("alice", "chat");
//! me.write(new TextEncoder().encode("hello"));
//! for await (const frame of connection.subscribe("bob", "chat")) {
//!   console.log(new TextDecoder().decode(frame.payload));
//! }
//! ```
//!
//! Failures are thrown (or rejected) as `Error`s named `MoqError` with the moq-lite wire
//! `code` and the `reason` as properties.

mod announcements;
mod connection;
mod error;
mod iterator;
mod log;
mod options;
mod publisher;
mod race;
mod subscription;

pub use announcements::Announcements;
pub use connection::Connection;
pub use log::set_log_level;
pub use publisher::Publisher;
pub use subscription::Subscription;
