//! The outbox publisher and its inbox consumers (docs/DESIGN.md §10).
//!
//! Workflow transitions and outbox rows commit together; the [`publisher::Publisher`] delivers
//! every row at least once to every consumer, and marks it published only after all of them
//! took it. A consumer records the event id in its inbox in the same transaction as its own
//! change, so a redelivery (after a crash between delivery and marking) changes nothing.
//! Consumers of workflow state compare revisions: an older or repeated revision is ignored,
//! and a gap is repaired by re-projecting from durable workflow state, never by silently
//! advancing.
//!
//! [`inbox`] is what every consumer shares and depends on nothing else here; the publisher,
//! the [`projections`] and the [`webhook`] each build on it alone, and [`consumers`] gathers
//! the standard set, so the publisher never needs to know which consumers exist.

pub mod inbox;
pub mod projections;
pub mod publisher;
mod standard;
pub mod webhook;

pub use standard::consumers;
