//! Z29C's workflow engine. The modules, in the order a step meets them (docs/DESIGN.md):
//!
//! - **pure** — [`domain`]: identities, states, outcomes, contracts, the recovery decision table,
//!   operators' permitted actions, the words people see. No I/O; compiles to wasm32 so the
//!   console shares it. [`definition`]: the versioned workflow definitions and their requests.
//! - **boundary** — [`adapter`]: destinations behind their declared contracts, verified by the
//!   contract suite before they are trusted.
//! - **protocol** — [`intake`] starts workflows; [`worker`] drives each step through the six
//!   checkpoints and recovers unknown outcomes by contract. [`store`] holds every statement they
//!   (and the human path) write, by table.
//! - **recovery** — [`recovery`]: what people do to steps the engine could not settle.
//! - **reads** — [`read`]: the read models behind the console's pages and the API.
//! - **events** — [`outbox`]: the publisher and its consumers (projections, the alert
//!   webhook).
//! - **watch** — [`watch`]: semantic invariants, alerts, telemetry, and the check before
//!   workers resume on a restored database.
//!
//! Around them: [`operators`] (accounts and roles), [`db`] (pool and migrations),
//! [`embedded_pg`] (the private cluster used when no `DATABASE_URL` is given) and [`failpoint`]
//! (the scenario harness's kill points). Everything but `domain` and `definition` needs the
//! `runtime` feature.

pub mod definition;
pub mod domain;
pub mod file_error;

#[cfg(feature = "runtime")]
pub mod adapter;
#[cfg(feature = "runtime")]
pub mod archive;
#[cfg(feature = "runtime")]
pub mod db;
#[cfg(feature = "runtime")]
pub mod diff;
#[cfg(feature = "runtime")]
pub mod embedded_pg;
#[cfg(feature = "runtime")]
pub mod failpoint;
#[cfg(feature = "runtime")]
pub mod intake;
#[cfg(feature = "runtime")]
pub mod maintenance;
#[cfg(feature = "runtime")]
pub mod operators;
#[cfg(feature = "runtime")]
pub mod outbox;
#[cfg(feature = "runtime")]
pub mod read;
#[cfg(feature = "runtime")]
pub mod recovery;
#[cfg(feature = "runtime")]
pub mod store;
#[cfg(feature = "runtime")]
pub mod template;
#[cfg(feature = "runtime")]
pub mod watch;
#[cfg(feature = "runtime")]
pub mod worker;
#[cfg(feature = "runtime")]
pub mod yaml;
