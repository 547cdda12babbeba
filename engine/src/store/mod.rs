//! Every SQL statement of the engine, as small named functions taking an executor.

pub mod workflow;
