//! Z29C's workflow engine.
//!
//! [`domain`] holds identities, states, outcomes and the decisions made from them; it does no
//! I/O and compiles to wasm32 so the console can share it. Everything else needs the `runtime`
//! feature: the PostgreSQL store, the private cluster used when no `DATABASE_URL` is given, and
//! (in later modules) workers and recovery.

pub mod contracts;
pub mod definition;
pub mod domain;

#[cfg(feature = "runtime")]
pub mod adapter;
#[cfg(feature = "runtime")]
pub mod alerts;
#[cfg(feature = "runtime")]
pub mod bulk;
#[cfg(feature = "runtime")]
pub mod contract_suite;
#[cfg(feature = "runtime")]
pub mod db;
#[cfg(feature = "runtime")]
pub mod embedded_pg;
#[cfg(feature = "runtime")]
pub mod failpoint;
#[cfg(feature = "runtime")]
pub mod intake;
#[cfg(feature = "runtime")]
pub mod invariants;
#[cfg(feature = "runtime")]
pub mod operate;
#[cfg(feature = "runtime")]
pub mod operators;
#[cfg(feature = "runtime")]
pub mod outbox;
#[cfg(feature = "runtime")]
pub mod projections;
#[cfg(feature = "runtime")]
pub mod replace;
#[cfg(feature = "runtime")]
pub mod review;
#[cfg(feature = "runtime")]
pub mod status;
#[cfg(feature = "runtime")]
pub mod store;
#[cfg(feature = "runtime")]
pub mod telemetry;
#[cfg(feature = "runtime")]
pub mod worker;
