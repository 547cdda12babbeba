//! Notes (docs/DESIGN.md §20): the form that leaves one on a workflow, a step or an incident,
//! and the list the workflow and incident pages show. A note never changes a state.

pub mod api;
pub mod components;
pub mod types;
