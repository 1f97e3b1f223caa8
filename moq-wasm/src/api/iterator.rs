//! JavaScript async iterators over Rust sources.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use js_sys::Promise;
use wasm_bindgen::JsValue;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{JsFuture, future_to_promise};

use super::error::set;

// wasm-bindgen cannot name a method `[Symbol.asyncIterator]`, so a line of JavaScript
// makes an exported object iterable with `for await`.
#[wasm_bindgen(inline_js = "
export function asyncIterable(source) {
  return {
    source,
    next: () => source.next(),
    return: (value) => { source.close(); return Promise.resolve({ value, done: true }); },
    [Symbol.asyncIterator]() { return this; },
  };
}")]
extern "C" {
    /// `source` (an exported object with `next()` and `close()`) as an async iterable.
    #[wasm_bindgen(js_name = asyncIterable)]
    pub(crate) fn async_iterable(source: JsValue) -> JsValue;
}

/// Runs the `next()` calls of one iterator one after another (a caller may call `next()`
/// again before the last one settled; each waits for the one before), each resolving to
/// an iterator result `{ value, done }`.
#[derive(Debug, Default)]
pub(crate) struct Serial {
    last: RefCell<Option<Promise>>,
}

impl Serial {
    /// Queues `step` behind the previous call; `Ok(Some(value))` is a value, `Ok(None)` the
    /// end, `Err` a rejection.
    pub(crate) fn next<F>(&self, step: impl FnOnce() -> F + 'static) -> Promise
    where
        F: Future<Output = Result<Option<JsValue>, JsValue>> + 'static,
    {
        let previous = self.last.borrow_mut().take();
        let promise = future_to_promise(async move {
            if let Some(previous) = previous {
                let _ = JsFuture::from(previous).await;
            }
            let result = js_sys::Object::new();
            match step().await? {
                Some(value) => {
                    set(&result, "value", &value);
                    set(&result, "done", &JsValue::FALSE);
                }
                None => {
                    set(&result, "value", &JsValue::UNDEFINED);
                    set(&result, "done", &JsValue::TRUE);
                }
            }
            Ok(result.into())
        });
        *self.last.borrow_mut() = Some(promise.clone());
        promise
    }
}

/// State one iterator's steps take in turn: taken by a step, put back after it.
pub(crate) type Shared<T> = Rc<RefCell<Option<T>>>;
