//! The JavaScript API (wasm-bindgen): what a page imports from the generated module.
//!
//! The npm package (`moq-wasm/package/`: its entry point, TypeScript declarations and
//! error class around the generated module; `cargo xtask package` builds it) is how a page
//! uses it:
//!
//! ```js
//! import { connect, MoqError } from "moqx-wasm";
//! const fingerprint = await (await fetch("http://127.0.0.1:4443/certificate.sha256")).text();
//! const connection = await connect("https://127.0.0.1:4443/room", {
//!   fingerprint,
//!   webSocketUrl: "ws://127.0.0.1:4443/room", // the fallback, where WebTransport is missing
//! });
//! console.log(connection.transport); // "webtransport" or "websocket"
//! const me = connection.publish("alice", "chat");
//! me.write(new TextEncoder().encode("hello"));
//! for await (const frame of connection.subscribe("bob", "chat")) {
//!   console.log(new TextDecoder().decode(frame.payload));
//! }
//! ```
//!
//! Failures are thrown (or rejected) as instances of the package's `MoqError` class, with
//! the moq-lite wire `code` and the `reason` as properties.

mod announcements;
mod connection;
mod error;
mod iterator;
mod link;
mod log;
mod options;
mod publisher;
mod subscription;

pub use announcements::Announcements;
pub use connection::Connection;
pub use log::set_log_level;
pub use publisher::Publisher;
pub use subscription::Subscription;
