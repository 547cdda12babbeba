//! Workflow definitions as data (docs/DESIGN.md §16): versioned YAML files, applied once and
//! immutable after, compiled into a [`Definition`] the engine runs. A workflow keeps the
//! version it started with; a newer version never changes a running one.
//!
//! Outbound requests are rendered deterministically from the immutable normalized input, the
//! dependencies' receipts, the request key and the definition version: no clock, no
//! randomness, no environment ([`crate::template`]). Recovery renders the request again and
//! compares digests before sending again.

use serde::{Deserialize, Serialize};

#[cfg(feature = "runtime")]
mod catalog;
#[cfg(feature = "runtime")]
mod check;
#[cfg(feature = "runtime")]
mod compile;
#[cfg(feature = "runtime")]
pub mod file;

#[cfg(feature = "runtime")]
pub use catalog::{Applied, ApplyError, Catalog, CatalogError, apply, apply_as};
#[cfg(feature = "runtime")]
pub use compile::{Definition, StepRequest};

/// Whether the step runs locally or crosses the boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type))]
#[cfg_attr(
    feature = "runtime",
    sqlx(type_name = "step_kind", rename_all = "snake_case")
)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// Deterministic and local: safe to run again.
    Pure,
    /// Calls an adapter: its effect outlives any transaction.
    External,
    /// Calls an adapter to counteract an earlier effect.
    Compensation,
}

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

/// Whether `name` can name a definition or an adapter: 1 to 63 lowercase letters, digits, `_`
/// or `-`, starting with a letter or digit (the `definition` and `adapter` tables check it too).
pub fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// Whether `pattern` can name adapters in a definition's `adapters` list or a token's limit:
/// a name, or a name with one `*` standing for any run of name characters (`letters-*`).
pub fn is_adapter_pattern(pattern: &str) -> bool {
    match pattern.split_once('*') {
        None => is_name(pattern),
        Some((before, after)) => {
            !after.contains('*')
                && pattern.len() <= 63
                && (before.is_empty() || is_name(before))
                && after
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        }
    }
}

/// Whether adapter `name` is one `pattern` names ([`is_adapter_pattern`]).
pub fn adapter_matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((before, after)) => {
            name.len() >= before.len() + after.len()
                && name.starts_with(before)
                && name.ends_with(after)
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_names_adapters_by_one_star() {
        assert!(adapter_matches("letters-*", "letters-eu"));
        assert!(!adapter_matches("letters-*", "letters"));
        assert!(adapter_matches("*-docs", "queryable-docs"));
        assert!(!adapter_matches("payments", "payments-basic"));
        assert!(is_adapter_pattern("pay*ments"));
        assert!(!is_adapter_pattern("a**"));
        assert!(!is_adapter_pattern("Letters-*"));
        assert!(is_adapter_pattern("*"));
    }
}
