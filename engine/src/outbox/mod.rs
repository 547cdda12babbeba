//! The outbox publisher and its consumers (docs/DESIGN.md §10).
//!
//! Workflow transitions and outbox rows commit together; the [`publisher::Publisher`] delivers
//! every row, once it is final, at least once to every consumer in position order, and moves
//! its cursor past it only after all of them took it. A consumer moves its own cursor in the
//! same transaction as its change, so a redelivery (after a crash between delivery and the
//! publisher's move) changes nothing.
//! Consumers of workflow state compare revisions: an older or repeated revision is ignored,
//! and a gap is repaired by re-projecting from durable workflow state, never by silently
//! advancing.
//!
//! [`consumer`] is what every consumer shares and depends on nothing else here; the publisher,
//! the [`projections`] and the [`webhook`] each build on it alone, and [`consumers`] gathers
//! the standard set, so the publisher never needs to know which consumers exist.

pub mod consumer;
pub mod projections;
pub mod publisher;
mod standard;
pub mod webhook;

pub use standard::consumers;
