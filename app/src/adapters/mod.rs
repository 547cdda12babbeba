//! The adapters: what each declares and what verification proved of it, whether it may send,
//! and the hold an approver puts on it during its provider's outage (docs/DESIGN.md §20).

pub mod api;
pub mod components;
pub mod types;
