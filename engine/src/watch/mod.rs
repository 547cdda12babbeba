//! Watching the engine from durable state (docs/DESIGN.md §11): the invariants that must
//! always hold, the alerts raised when something needs a person, and the figures `/metrics`
//! exposes. Each is derived from what is stored, never from what a process remembers, so any
//! process can run it and a restart loses nothing.

pub mod alerts;
pub mod invariants;
pub mod telemetry;
