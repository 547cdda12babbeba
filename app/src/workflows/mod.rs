//! One workflow: its steps and what each waits for (operators), and the status page its
//! customer reads (anyone with the link).

pub mod api;
pub mod components;
pub mod types;
