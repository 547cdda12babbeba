//! The overview: how many workflows are in each state.

pub mod api;
pub mod components;
pub mod types;
