//! Every SQL statement of the engine, as small named functions taking an executor or a
//! connection inside the caller's transaction.

pub mod adapter;
pub mod journal;
pub mod step;
pub mod token;
pub mod workflow;
