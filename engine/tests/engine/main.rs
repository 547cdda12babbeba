//! The engine's tests, one binary: each module beside the part of the engine it tests, every
//! database test on its own fresh PostgreSQL database, every destination a real HTTP service.

mod adapter_body;
mod adapter_file;
mod alerts;
mod archive;
mod archive_restore;
mod bounds;
mod breaker;
mod bulk;
mod constraints;
mod contract_suite;
mod data_adapter;
mod definitions;
mod embedded_pg;
mod four_eyes;
mod hold;
mod indexes;
mod intake;
mod invariants;
mod limits;
mod notes;
mod operate;
mod operators;
mod outbox;
mod pause;
mod pipeline;
mod privileges;
mod queue_counts;
mod replace;
mod roles;
mod schemas;
mod state_rule;
mod status;
mod support;
mod trust;
mod worker;
