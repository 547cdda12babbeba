//! The `z29c` binary's parts, in a library so tests can build the router and the commands.

mod archive;
pub mod cli;
pub mod commands;
pub mod database;
pub mod demo;
mod files;
mod history;
pub mod http;
/// What measures and proves Z29C (benchmarks, the scenario harness): never in a build without
/// `--features lab`, so never in the binary a deployment runs.
#[cfg(feature = "lab")]
pub mod lab;
mod maintenance;
pub mod metrics;
pub mod ops;
pub mod policy;
pub mod shipped;
pub mod shutdown;
pub mod startup;
pub mod state;
pub mod telemetry;
