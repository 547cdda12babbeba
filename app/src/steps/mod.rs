//! The step evidence page: everything known about one step, evidence first.

pub mod api;
pub mod components;
pub mod form;
pub mod proposal;
pub mod types;
