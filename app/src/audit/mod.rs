//! The audit log: every action, by whom, why, newest first; append-only.

pub mod api;
pub mod components;
pub mod types;
