//! The library's `tracing` events on the browser's console.

use wasm_bindgen::prelude::*;

/// Shows the library's log on the console at `level` and above (`"error"`, `"warn"`,
/// `"info"`, `"debug"`, `"trace"`), or per target as `RUST_LOG` does
/// (`"moqx_net=debug,moqx_wasm=trace"`). The first call sets it; later calls are ignored
/// (the browser's equivalent of `RUST_LOG`, read once).
#[wasm_bindgen(js_name = setLogLevel)]
pub fn set_log_level(filter: &str) -> Result<(), JsValue> {
    use tracing_subscriber::prelude::*;
    let targets: tracing_subscriber::filter::Targets = filter
        .parse()
        .map_err(|error| js_sys::RangeError::new(&format!("log filter {filter:?}: {error}")))?;
    let console = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .without_time() // std's clock panics in a browser; the console stamps each line
        .with_writer(tracing_web::MakeWebConsoleWriter::new());
    let _ = tracing_subscriber::registry()
        .with(console.with_filter(targets))
        .try_init();
    Ok(())
}
