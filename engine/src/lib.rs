//! Z29C's workflow engine.
//!
//! [`domain`] holds identities, states, outcomes and the decisions made from them; it does no
//! I/O and compiles to wasm32 so the console can share it. Everything else needs the `runtime`
//! feature: the PostgreSQL store, the private cluster used when no `DATABASE_URL` is given, and
//! (in later modules) workers and recovery.

pub mod domain;

#[cfg(feature = "runtime")]
pub mod db;
#[cfg(feature = "runtime")]
pub mod embedded_pg;
#[cfg(feature = "runtime")]
pub mod store;
