//! The `z29c` binary's parts, in a library so tests can build the router and the commands.

pub mod cli;
pub mod commands;
pub mod database;
mod files;
pub mod harness;
mod history;
pub mod http;
mod maintenance;
pub mod metrics;
pub mod ops;
pub mod policy;
pub mod shutdown;
pub mod startup;
pub mod state;
pub mod telemetry;
