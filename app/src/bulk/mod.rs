//! Bulk recovery: select by filter, see the exact rows (and which the contract refuses), act
//! on exactly those at a set rate, and follow the progress.

pub mod api;
pub mod components;
pub mod live;
pub mod types;
