//! The destinations over real HTTP on loopback, each test with its own PostgreSQL database.

mod access;
mod beside;
mod client;
mod faults;
mod idempotent;
mod opaque;
mod payments;
mod protocol;
mod queryable;
mod webhook;
mod withdrawal;
