//! A session kept up across relays from the browser: [`moqx_net::reconnect`]'s policy on
//! the page's event loop, dialing with [`connect`](crate::connect) (so each new session
//! races WebTransport and a WebSocket again, and says which won).

use moqx_net::reconnect::hop_id;

use crate::connect::{ConnectOptions, Connected};
use crate::race::connect;
use crate::runtime::WasmRuntime;

/// A session kept up across relays, each one [`Connected`]: see [`moqx_net::reconnect`].
pub type Reconnect = moqx_net::reconnect::Reconnect<Connected>;

/// Keeps a session up to one of `urls` (tried in order, then round again, and the URL a
/// GOAWAY names first) with `options`, on this thread's event loop. `first`, when given,
/// is a session already made to `urls[0]`: kept up from there on.
///
/// Every session serves `options.session`'s publish origin and fills its subscribe
/// origin; its hop id is drawn once if unset (how relays recognise the same publisher
/// on its next session). `options.websocket_url` applies to `urls[0]` only: every other
/// URL's WebSocket is at its own host, port and path.
///
/// # Panics
///
/// If `urls` is empty.
pub fn reconnect(
    urls: Vec<String>,
    mut options: ConnectOptions,
    first: Option<Connected>,
) -> Reconnect {
    assert!(!urls.is_empty(), "reconnect needs at least one URL");
    if options.session.origin_id == 0 {
        options.session.origin_id = hop_id(random());
    }
    let home = urls[0].clone();
    let mut first = first;
    let (reconnect, task) = Reconnect::new(
        WasmRuntime::<crate::WebTransportSession>::new(),
        urls,
        random(),
        move |url: String| {
            let ready = first.take();
            let mut options = options.clone();
            if url != home {
                options.websocket_url = None;
            }
            async move {
                match ready {
                    Some(connected) => Ok(connected),
                    None => connect(&url, options).await,
                }
            }
        },
    );
    wasm_bindgen_futures::spawn_local(task);
    reconnect
}

/// 64 random bits from the browser's `Math.random` (two draws of 32).
pub(crate) fn random() -> u64 {
    let draw = || (js_sys::Math::random() * f64::from(u32::MAX)) as u64;
    (draw() << 32) | draw()
}
