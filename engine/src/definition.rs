//! Workflow definitions, in code and versioned. A workflow keeps the version it started with;
//! code that moves to v2 still runs v1 workflows as v1.
//!
//! Outbound requests are generated deterministically from the immutable normalized input and
//! the definition version: no clock, no randomness, defaults fixed per version. Recovery
//! regenerates the request and compares digests before sending again.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::domain::InputDigest;

/// The only definition so far.
pub const DOCUMENT_DELIVERY: &str = "document_delivery";

/// Every definition this engine runs.
pub const DEFINITIONS: [&str; 1] = [DOCUMENT_DELIVERY];

/// Versions of `document_delivery` this code can run; new workflows get the last one.
pub const DOCUMENT_DELIVERY_VERSIONS: [i32; 2] = [1, 2];

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

/// One step of a definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepSpec {
    pub logical: &'static str,
    pub kind: StepKind,
    pub depends_on: &'static [&'static str],
    /// Receipt (or output) fields this step reads from the steps it depends on.
    pub required_fields: &'static [&'static str],
    /// Whether a waived dependency satisfies this step.
    pub accepts_waiver: bool,
}

/// Why an input cannot start a workflow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("unknown definition `{0}`")]
    UnknownDefinition(String),
    #[error("definition `{name}` has no version {version}")]
    UnknownVersion { name: String, version: i32 },
    #[error("input is invalid: {0}")]
    Invalid(String),
}

/// The input of a document delivery, normalized.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentDeliveryInput {
    /// The adapter that delivers the document.
    pub adapter: String,
    /// The adapter that sends the completion notification (defaults to `adapter`).
    #[serde(default)]
    pub notify_adapter: Option<String>,
    pub recipient: String,
    pub document: Document,
}

/// The document itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Document {
    pub title: String,
    pub body: String,
}

/// The steps of `document_delivery`, the same in v1 and v2 (v2 changes the request shape).
pub fn document_delivery_steps() -> [StepSpec; 3] {
    [
        StepSpec {
            logical: "render",
            kind: StepKind::Pure,
            depends_on: &[],
            required_fields: &[],
            accepts_waiver: false,
        },
        StepSpec {
            logical: "deliver",
            kind: StepKind::External,
            depends_on: &["render"],
            required_fields: &["document_digest"],
            accepts_waiver: false,
        },
        StepSpec {
            logical: "notify",
            kind: StepKind::External,
            depends_on: &["deliver"],
            required_fields: &["external_reference", "input_digest"],
            accepts_waiver: false,
        },
    ]
}

/// Checks the definition and version, and normalizes the input: trimmed fields, `\n` line
/// endings, the notification adapter made explicit. The result is what gets digested.
pub fn normalize_input(name: &str, version: i32, input: &Value) -> Result<Value, InputError> {
    if name != DOCUMENT_DELIVERY {
        return Err(InputError::UnknownDefinition(name.to_owned()));
    }
    if !DOCUMENT_DELIVERY_VERSIONS.contains(&version) {
        return Err(InputError::UnknownVersion {
            name: name.to_owned(),
            version,
        });
    }
    let mut parsed: DocumentDeliveryInput =
        serde_json::from_value(input.clone()).map_err(|e| InputError::Invalid(e.to_string()))?;
    parsed.adapter = parsed.adapter.trim().to_owned();
    parsed.notify_adapter = Some(
        parsed
            .notify_adapter
            .map(|a| a.trim().to_owned())
            .unwrap_or_else(|| parsed.adapter.clone()),
    );
    parsed.recipient = parsed.recipient.trim().to_owned();
    parsed.document.title = parsed.document.title.trim().to_owned();
    parsed.document.body = parsed.document.body.replace("\r\n", "\n");
    for (field, value) in [
        ("adapter", &parsed.adapter),
        ("recipient", &parsed.recipient),
        ("document.title", &parsed.document.title),
    ] {
        if value.is_empty() {
            return Err(InputError::Invalid(format!("`{field}` must not be empty")));
        }
    }
    serde_json::to_value(parsed).map_err(|e| InputError::Invalid(e.to_string()))
}

/// The result of the pure `render` step: the digest of the normalized document.
pub fn render(input: &DocumentDeliveryInput) -> Value {
    let digest = InputDigest::of_json(&json!({
        "title": input.document.title,
        "body": input.document.body,
    }));
    json!({ "document_digest": digest, "title": input.document.title })
}

/// A step's rendered request, before its adapter shapes it for the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRequest {
    pub request: Value,
    /// The digest the destination compares under one key.
    pub content_digest: InputDigest,
}

/// Generates the outbound request of an external step from the immutable inputs.
///
/// `dependencies` holds the outputs or receipt fields of the steps it depends on, by logical
/// name. Version 2 words the summary differently; v1 workflows never see it.
pub fn prepare_request(
    version: i32,
    logical: &str,
    request_key: &str,
    input: &DocumentDeliveryInput,
    dependencies: &Value,
) -> Result<StepRequest, InputError> {
    let field = |step: &str, name: &str| -> Result<String, InputError> {
        dependencies[step][name]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| InputError::Invalid(format!("`{step}` did not provide `{name}`")))
    };
    let (content_digest, summary) = match logical {
        "deliver" => (
            field("render", "document_digest")?,
            format!("Document \"{}\"", input.document.title),
        ),
        "notify" => {
            let reference = field("deliver", "external_reference")?;
            let digest = field("deliver", "input_digest")?;
            let note = json!({ "delivered": reference, "request_digest": digest, "recipient": input.recipient });
            (
                InputDigest::of_json(&note).to_string(),
                format!(
                    "Document \"{}\" was delivered as {reference}",
                    input.document.title
                ),
            )
        }
        other => {
            return Err(InputError::Invalid(format!(
                "`{other}` is not an external step"
            )));
        }
    };
    let content_digest = InputDigest::parse(&content_digest)
        .ok_or_else(|| InputError::Invalid("malformed dependency digest".into()))?;
    // Version 2 names the definition in the summary: other bytes under the same protocol.
    let summary = if version >= 2 {
        format!("{summary} ({DOCUMENT_DELIVERY} v{version})")
    } else {
        summary
    };
    let _ = request_key;
    Ok(StepRequest {
        request: json!({ "recipient": input.recipient, "summary": summary }),
        content_digest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> Value {
        json!({"adapter": " docs ", "recipient": "r-1", "document": {"title": " Hi ", "body": "a\r\nb"}})
    }

    #[test]
    fn normalization_trims_fills_defaults_and_is_stable() {
        let normalized = normalize_input(DOCUMENT_DELIVERY, 1, &input()).unwrap();
        assert_eq!(normalized["adapter"], "docs");
        assert_eq!(normalized["notify_adapter"], "docs");
        assert_eq!(normalized["document"]["body"], "a\nb");
        assert_eq!(
            normalize_input(DOCUMENT_DELIVERY, 1, &normalized).unwrap(),
            normalized
        );
    }

    #[test]
    fn unknown_fields_definitions_and_versions_are_refused() {
        let mut extra = input();
        extra["colour"] = json!("red");
        assert!(matches!(
            normalize_input(DOCUMENT_DELIVERY, 1, &extra),
            Err(InputError::Invalid(_))
        ));
        assert!(matches!(
            normalize_input("x", 1, &input()),
            Err(InputError::UnknownDefinition(_))
        ));
        assert!(matches!(
            normalize_input(DOCUMENT_DELIVERY, 9, &input()),
            Err(InputError::UnknownVersion { .. })
        ));
    }

    #[test]
    fn the_same_inputs_always_prepare_the_same_request() {
        let normalized = normalize_input(DOCUMENT_DELIVERY, 1, &input()).unwrap();
        let parsed: DocumentDeliveryInput = serde_json::from_value(normalized).unwrap();
        let deps = json!({ "render": render(&parsed) });
        let a = prepare_request(1, "deliver", "w-1/deliver-v1", &parsed, &deps).unwrap();
        let b = prepare_request(1, "deliver", "w-1/deliver-v1", &parsed, &deps).unwrap();
        assert_eq!(a, b);
        let v2 = prepare_request(2, "deliver", "w-1/deliver-v1", &parsed, &deps).unwrap();
        assert_ne!(a.request, v2.request, "v2 changes the bytes");
        assert_eq!(a.content_digest, v2.content_digest);
    }

    #[test]
    fn notify_needs_the_delivery_receipt_fields() {
        let normalized = normalize_input(DOCUMENT_DELIVERY, 1, &input()).unwrap();
        let parsed: DocumentDeliveryInput = serde_json::from_value(normalized).unwrap();
        let missing = json!({ "deliver": { "external_reference": "x-1" } });
        assert!(prepare_request(1, "notify", "k", &parsed, &missing).is_err());
        let digest = InputDigest::of_bytes(b"x").to_string();
        let present = json!({ "deliver": { "external_reference": "x-1", "input_digest": digest } });
        assert!(prepare_request(1, "notify", "k", &parsed, &present).is_ok());
    }
}
