//! The review queue, the console's landing page: what nobody knows yet, oldest first.

pub mod api;
pub mod components;
pub mod types;
