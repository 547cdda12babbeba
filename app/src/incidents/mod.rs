//! Duplicate-effect and digest-conflict incidents: the evidence of every external reference,
//! and the resolution an approver names.

pub mod api;
pub mod components;
pub mod list;
pub mod types;
