//! Errors as JavaScript sees them: instances of the package's `MoqError` class
//! (`moq-wasm/package/moq_error.js`, beside the generated module), so that a page's
//! `instanceof MoqError` narrows them.

use wasm_bindgen::JsValue;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(raw_module = "./moq_error.js")]
extern "C" {
    /// `class MoqError extends Error { code; reason }`.
    #[wasm_bindgen(js_name = MoqError)]
    type JsMoqError;

    #[wasm_bindgen(constructor, js_class = "MoqError")]
    fn new(code: f64, reason: &str) -> JsMoqError;
}

/// A `MoqError` carrying the moq-lite wire `code` and the `reason`.
pub(crate) fn moq_error(code: u64, reason: &str) -> JsValue {
    JsMoqError::new(code as f64, reason).into()
}

/// A [`moqx_net::Error`] as a `MoqError`, with `context` (what was being done) in front.
pub(crate) fn from_moq(error: moqx_net::Error, context: &str) -> JsValue {
    moq_error(error.to_code(), &format!("{context}: {error}"))
}

/// Sets a property of a fresh object (which cannot fail).
pub(crate) fn set(target: &JsValue, key: &str, value: &JsValue) {
    let _ = js_sys::Reflect::set(target, &JsValue::from_str(key), value);
}
