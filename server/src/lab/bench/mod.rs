//! `z29c bench engine`, `z29c bench console` and `z29c bench retention`: throughput, page
//! latency, page loads in a browser and a retention policy's steady state, measured on this
//! machine and printed as tables. Nothing here asserts a speed; the
//! figures go in docs/performance.md.

mod beside;
mod ceiling;
mod cluster;
mod console_bench;
mod cpu;
mod drive;
mod engine_bench;
mod fleet;
mod front_end;
mod instant;
mod limit_bench;
mod load;
mod page_load;
mod pgstats;
mod quantile;
mod retention_bench;
mod session;
mod under_load;

pub use cluster::BenchDatabase;
pub use console_bench::{ConsoleBenchArgs, console};
pub use engine_bench::{EngineBenchArgs, engine};
pub use fleet::{EngineWorkerArgs, engine_worker};
pub use retention_bench::{RetentionBenchArgs, retention};
