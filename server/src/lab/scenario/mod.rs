//! `z29c scenario matrix`: every fault point × every destination kind, each as real processes —
//! a worker process killed with SIGKILL at a failpoint (or, after destination acceptance, by
//! the harness), then a fresh worker process recovering — judged from outside by comparing the
//! destination's own ledger with Z29C's receipts, step states and invariants.
//!
//! Beside the fault points: answers timed around the adapters' deadline, and named scenarios —
//! PostgreSQL crashing under a running worker, a backup restored after the live system went
//! on, recovery by code whose newest definition is v2, and the first duplicate delivery
//! (docs/DESIGN.md §13).

mod fault_points;
mod holds;
mod judge;
mod matrix;
mod processes;
mod setup;
mod soak;
mod target;

pub use matrix::{MatrixArgs, matrix};
pub use soak::{SoakArgs, soak};
