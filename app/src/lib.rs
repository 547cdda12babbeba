//! Z29C's operator recovery console.
//!
//! Rendered on the server (`ssr`); in the browser (`hydrate`) only the islands come alive: the
//! step page's action forms, the overview's live counts and a bulk run's progress. Everything
//! else is plain HTML, and every page reads and every form posts without JavaScript. Each
//! feature is a module with its DTOs (`types`), server functions (`api`) and views
//! (`components`).

pub mod adapters;
#[cfg(feature = "ssr")]
pub mod assets;
pub mod audit;
pub mod auth;
pub mod bulk;
pub mod error;
pub mod forms;
pub mod incidents;
pub mod lists;
pub mod live;
pub mod notes;
pub mod overview;
pub mod review;
mod scripts;
mod shell;
pub mod steps;
pub mod workflow_list;
pub mod workflows;

pub use shell::{App, shell};

/// The browser entry point, called by Leptos's island loader before it hydrates each island.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    // A panic's message in the browser's console, for development: the hook and the formatting
    // it keeps would add to the wasm every operator loads.
    #[cfg(debug_assertions)]
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_islands();
    live::expect_islands();
}
