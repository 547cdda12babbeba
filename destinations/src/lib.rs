//! Synthetic external destinations for Z29C.
//!
//! Each destination is a separate HTTP service with its own PostgreSQL database, which Z29C
//! reaches only over the network. The services arrive with their own issue; this crate holds
//! their place in the workspace so the boundary between `engine` and `destinations` is visible
//! from the start.
