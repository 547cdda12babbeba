//! Every SQL statement of the engine, as small named functions taking an executor or a
//! connection inside the caller's transaction.

pub mod action;
pub mod adapter;
pub mod adapter_version;
pub mod alert;
pub mod attempt;
pub mod authorization;
pub mod batch;
pub mod breaker;
pub mod bulk;
pub mod compensation;
pub mod conclusion;
pub mod definition;
pub mod guard;
pub mod held;
pub mod hold;
pub mod incident;
pub mod incident_resolution;
pub mod invariant;
pub mod journal;
pub mod lease;
pub mod note;
pub mod operator;
pub mod outbox;
pub mod pause;
pub mod projection;
pub mod receipt;
pub mod replacement;
pub mod request;
pub mod restore;
pub mod schema;
pub mod sign_in;
pub mod step;
pub mod token;
pub mod waiver;
pub mod workflow;
