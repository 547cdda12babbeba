//! The server's tests, one binary: the API, the console's server functions and the HTTP surface,
//! each driven in-process through the router against its own fresh PostgreSQL database.

mod adapter_scope;
mod api;
mod assets;
mod auth;
mod cli;
mod console;
mod controls;
mod decisions;
mod demo;
mod files_api;
mod four_eyes;
mod fuzz;
mod fuzz_routes;
mod headers;
mod hold;
mod http;
mod incidents;
mod islands;
mod kept_forms;
mod limits;
mod notes;
mod observability;
mod ops_api;
mod own_api;
mod pause_many;
mod proxy;
mod reads;
mod restored;
mod support;
mod trust;
