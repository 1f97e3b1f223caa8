//! Errors as JavaScript sees them.

use wasm_bindgen::JsValue;

/// An `Error` named `MoqError` carrying the moq-lite wire `code` and the `reason`.
pub(crate) fn moq_error(code: u64, reason: &str) -> JsValue {
    let error = js_sys::Error::new(reason);
    error.set_name("MoqError");
    set(&error, "code", &JsValue::from_f64(code as f64));
    set(&error, "reason", &JsValue::from_str(reason));
    error.into()
}

/// A [`moq_net::Error`] as a `MoqError`, with `context` (what was being done) in front.
pub(crate) fn from_moq(error: moq_net::Error, context: &str) -> JsValue {
    moq_error(error.to_code(), &format!("{context}: {error}"))
}

/// Sets a property of a fresh object (which cannot fail).
pub(crate) fn set(target: &JsValue, key: &str, value: &JsValue) {
    let _ = js_sys::Reflect::set(target, &JsValue::from_str(key), value);
}
