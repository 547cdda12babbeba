//! Watching the engine from durable state (docs/DESIGN.md §11): the invariants that must
//! always hold, the alerts raised when something needs a person, and the figures `/metrics`
//! exposes. Each is derived from what is stored, never from what a process remembers, so any
//! process can run it and a restart loses nothing. The exception is [`latency`]: the latency
//! histograms of what this process did, which only it can time.

pub mod alerts;
pub mod breaker;
pub mod invariants;
pub mod latency;
pub mod telemetry;
