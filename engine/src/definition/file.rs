//! The definition file format (docs/DESIGN.md §16): YAML, every field documented in
//! docs/reference/definition-file.md, refused whole at the first unknown field or broken rule.
//!
//! ```yaml
//! name: payment_receipt
//! version: 1
//! description: Charges a card, then e-mails the receipt.
//! subject: "{{ input.customer }}"          # whom it acts on: revocations and the console name it
//! input_schema: { type: object, required: [customer, amount], properties: { … } }
//! normalize: { customer: "{{ input.customer | trim }}", amount: "{{ input.amount }}" }
//! status_step: charge                      # the step the status page speaks of (default: the first external)
//! retention: { settled: 90d }              # kept hot once settled (default: the deployment's)
//! steps:
//!   - name: charge
//!     external:
//!       adapter: payments                  # a name, or a template over the input…
//!       # adapters: [payments, payments-*]  # …choosing only among these
//!       request: { amount: "{{ input.amount }}", customer: "{{ input.customer }}" }
//!     words: { noun: Payment, service: the payment service }
//!   - name: receipt
//!     depends_on: [charge]
//!     requires: { charge: [external_reference, amount] }
//!     external:
//!       adapter: mailer
//!       request: { to: "{{ input.email }}", text: "Charged {{ steps.charge.amount }}" }
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::file_error::FileError;

/// A definition file as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefinitionFile {
    pub name: String,
    pub version: i32,
    #[serde(default)]
    pub description: String,
    /// Whom or what a workflow acts on, rendered from the input: authority revocations match
    /// it, and the console shows it.
    pub subject: String,
    /// A JSON Schema every input must satisfy before anything is stored.
    pub input_schema: Value,
    /// A template tree over `input` giving the normalized input (what is digested and what
    /// every later template reads). Without it the input is used as given.
    #[serde(default)]
    pub normalize: Option<Value>,
    /// The step whose state the status page speaks of; the first external step by default.
    #[serde(default)]
    pub status_step: Option<String>,
    /// How long its settled workflows stay in the hot tables (docs/DESIGN.md §21).
    #[serde(default)]
    pub retention: Option<RetentionFile>,
    pub steps: Vec<StepFile>,
}

/// A definition's retention as written: `settled: 90d`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionFile {
    /// How long a settled workflow stays before it is archived (`90d`).
    pub settled: String,
}

/// One step as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepFile {
    pub name: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// The fields this step reads from each dependency's output or receipt.
    #[serde(default)]
    pub requires: BTreeMap<String, Vec<String>>,
    /// Whether a waived dependency satisfies this step.
    #[serde(default)]
    pub accepts_waiver: bool,
    #[serde(default)]
    pub pure: Option<PureFile>,
    #[serde(default)]
    pub external: Option<ExternalFile>,
    #[serde(default)]
    pub words: Option<WordsFile>,
}

/// A deterministic transform of the input and the dependencies' facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PureFile {
    /// A template tree: the step's output, which dependants read as `steps.<name>.<field>`.
    pub output: BTreeMap<String, Value>,
}

/// A call across the boundary, through an adapter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalFile {
    /// The adapter's name, or a template over the input choosing one.
    pub adapter: String,
    /// The adapters a templated `adapter` may choose: names, or patterns with one `*`
    /// (`letters-*`). Required when `adapter` is a template; checked when the file is applied
    /// and when each workflow starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapters: Option<Vec<String>>,
    /// A template tree: the request the adapter shapes for the wire.
    pub request: Value,
    /// What the destination compares under one key; the digest of `request` by default.
    /// (What counteracts the step is its adapter's `withdraw` operation, when it has one.)
    #[serde(default)]
    pub digest: Option<String>,
}

/// The words people see for a step; any sentence left out is made from `noun` and `service`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WordsFile {
    /// What the effect is called: "Payment" reads "Payment may have completed; …".
    pub noun: String,
    /// Who makes it: "the payment service" reads "Waiting for the payment service".
    pub service: String,
    #[serde(default)]
    pub waiting: Option<String>,
    #[serde(default)]
    pub in_flight: Option<String>,
    #[serde(default)]
    pub unknown: Option<String>,
    /// `{reference}` stands for the external reference.
    #[serde(default)]
    pub succeeded: Option<String>,
    #[serde(default)]
    pub review: Option<String>,
}

impl DefinitionFile {
    /// Parses `source`; the checks across fields are [`super::Definition::compile`]'s.
    pub fn parse(source: &str) -> Result<Self, FileError> {
        crate::yaml::parse(source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_field_is_refused_with_its_line() {
        let source = "name: x\nversion: 1\nsubject: s\ninput_schema: {}\nsteps: []\ncolour: red\n";
        let error = DefinitionFile::parse(source).unwrap_err();
        assert_eq!(error.line, Some(6), "{error}");
        assert!(error.message.contains("unknown field `colour`"), "{error}");
    }
}
