//! What `z29c` runs to measure and to prove itself, beside serving: the benchmarks (`bench`) and
//! the scenario harness that kills workers and judges recovery from the destinations' ledgers
//! (`scenario`). Built only with `--features lab` (`make test`, `make bench-*`); the binary a
//! deployment builds (`cargo build --release -p server`) has none of it.

pub mod bench;
pub mod scenario;
