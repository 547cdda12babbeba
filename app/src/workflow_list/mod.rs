//! `/workflows`: workflows by state, definition, adapter and age, newest first — and the bulk
//! pause of the workflows listed (docs/DESIGN.md §20).

pub mod api;
pub mod components;
