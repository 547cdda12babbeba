//! What `z29c` runs to measure and to prove itself, beside serving: the benchmarks (`bench`),
//! the demo `make run` serves (`demo`), and the scenario harness that kills workers and judges
//! recovery from the destinations' ledgers (`scenario`).

pub mod bench;
pub mod demo;
pub mod scenario;
