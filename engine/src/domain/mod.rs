//! The pure heart of Z29C: identities, states and outcomes, and the decisions taken from them.
//!
//! Nothing here performs I/O, so the same code runs in workers, in server functions and in the
//! browser. With the `runtime` feature the enums also map to their PostgreSQL enum types.

mod state;

pub use state::WorkflowState;
