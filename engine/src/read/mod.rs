//! Read models: the queries behind the console's pages, the API and `/metrics`, each shaped
//! for what it shows. Read-only: nothing here changes durable state, so showing a page never
//! acts on anything. Unlike the rest of the engine, these modules hold their own SQL, since
//! each query exists for one page.

pub mod alerts;
pub mod evidence;
pub mod incident;
pub mod keyset;
pub mod metrics;
pub mod queue;
pub mod stats;
pub mod status;
pub mod workflows;
