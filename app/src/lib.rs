//! Z29C's operator recovery console.
//!
//! Rendered on the server (`ssr`) and hydrated in the browser (`hydrate`). Each feature is a
//! module with its DTOs (`types`), server functions (`api`) and views (`components`).

pub mod audit;
pub mod auth;
pub mod bulk;
pub mod error;
pub mod incidents;
pub mod overview;
pub mod review;
mod shell;
pub mod steps;
pub mod workflows;

pub use shell::{App, shell};

/// The browser entry point: attaches the server-rendered page to the running wasm.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(App);
    // Tests and people alike can tell the live page from the server-rendered one.
    if let Some(body) = leptos::prelude::document().body() {
        let _ = body.set_attribute("data-hydrated", "true");
    }
}
