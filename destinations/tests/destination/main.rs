//! The destinations over real HTTP on loopback, each test with its own PostgreSQL database.

mod access;
mod client;
mod faults;
mod idempotent;
mod opaque;
mod protocol;
mod queryable;
mod withdrawal;
