//! Workflow definitions as data (docs/DESIGN.md §16): versioned YAML files, applied once and
//! immutable after, compiled into a [`Definition`] the engine runs. A workflow keeps the
//! version it started with; a newer version never changes a running one.
//!
//! Outbound requests are rendered deterministically from the immutable normalized input, the
//! dependencies' receipts, the request key and the definition version: no clock, no
//! randomness, no environment ([`crate::template`]). Recovery renders the request again and
//! compares digests before sending again.

#[cfg(feature = "runtime")]
mod catalog;
#[cfg(feature = "runtime")]
mod check;
#[cfg(feature = "runtime")]
mod compile;
#[cfg(feature = "runtime")]
pub mod file;

#[cfg(feature = "runtime")]
pub use catalog::{Applied, ApplyError, ApplyOptions, Catalog, CatalogError, apply, apply_as};
#[cfg(feature = "runtime")]
pub use compile::{Definition, StepRequest};

use crate::domain::StepKind;

/// One step of a definition, as the step rows record it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepSpec {
    pub logical: String,
    pub kind: StepKind,
    pub depends_on: Vec<String>,
    /// Receipt (or output) fields this step reads from the steps it depends on.
    pub required_fields: Vec<String>,
    /// Whether a waived dependency satisfies this step.
    pub accepts_waiver: bool,
}

/// Why an input cannot start (or a step cannot run) under a definition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("unknown definition `{0}`")]
    UnknownDefinition(String),
    #[error("definition `{name}` has no version {version}")]
    UnknownVersion { name: String, version: i32 },
    #[error("input is invalid: {0}")]
    Invalid(String),
}
