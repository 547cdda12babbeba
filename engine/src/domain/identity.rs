//! The identities Z29C never conflates: workflow, step, attempt, request key, external reference.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// One logical step of a versioned definition, e.g. `deliver-v1`; it survives every attempt.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StepKey {
    /// The step's name in its definition (`render`, `deliver`, `notify`).
    pub logical: String,
    /// The definition version the workflow was started under.
    pub version: i32,
}

impl StepKey {
    /// The step `logical` of definition version `version`.
    pub fn new(logical: impl Into<String>, version: i32) -> Self {
        Self {
            logical: logical.into(),
            version,
        }
    }
}

impl fmt::Display for StepKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-v{}", self.logical, self.version)
    }
}

/// The identity of one logical external side effect, persisted with its input digest before
/// the call and reused by every attempt; only an explicit replacement step gets a new one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RequestKey(String);

impl RequestKey {
    /// `w-<workflow>/<step>`: derived, never random, so recovery can always recompute it.
    pub fn derive(workflow: Uuid, step: &StepKey) -> Self {
        Self(format!("w-{}/{step}", workflow.simple()))
    }

    /// The key of the `generation`-th replacement of `original` (1 for the first).
    pub fn replacement(original: &RequestKey, generation: u32) -> Self {
        Self(format!("{}/r{generation}", original.0))
    }

    /// The key as sent to the destination.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<String> for RequestKey {
    fn from(key: String) -> Self {
        Self(key)
    }
}

impl fmt::Display for RequestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `sha256:<hex>` of a normalized canonical input.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InputDigest(String);

impl InputDigest {
    /// The digest of `value` in its RFC 8785 canonical form (JCS): object keys sorted by UTF-16
    /// code units, no insignificant space, numbers and strings written one way only.
    pub fn of_json(value: &serde_json::Value) -> Self {
        Self::of_bytes(&canonical_json(value))
    }

    /// The digest of raw bytes.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
    }

    /// Accepts a stored or received digest if it has the `sha256:<64 hex>` shape.
    pub fn parse(text: &str) -> Option<Self> {
        let hex = text.strip_prefix("sha256:")?;
        (hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| Self(text.to_owned()))
    }

    /// The digest as stored and sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InputDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `value` in RFC 8785 canonical form: the bytes every digest of a JSON value is taken over.
pub fn canonical_json(value: &serde_json::Value) -> Vec<u8> {
    serde_json_canonicalizer::to_vec(value).expect("a JSON value always canonicalizes")
}

/// The largest integer JSON carries exactly everywhere (2^53): canonical JSON, and most
/// parsers, read numbers as doubles, so beyond it two integers can share a digest.
pub const MAX_EXACT_INTEGER: u64 = 1 << 53;

/// The path (`amount`, `items[2].qty`) of the first integer in `value` beyond
/// ±[`MAX_EXACT_INTEGER`], if there is one.
pub fn inexact_integer(value: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match value {
        Value::Number(n) => {
            let beyond = n
                .as_u64()
                .map(|u| u > MAX_EXACT_INTEGER)
                .or_else(|| n.as_i64().map(|i| i.unsigned_abs() > MAX_EXACT_INTEGER));
            beyond.unwrap_or(false).then(String::new)
        }
        Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
            inexact_integer(item).map(|rest| format!("[{i}]{}", dotted(&rest)))
        }),
        Value::Object(fields) => fields.iter().find_map(|(name, field)| {
            inexact_integer(field).map(|rest| format!("{name}{}", dotted(&rest)))
        }),
        _ => None,
    }
}

/// `rest` as it continues a path: `.name` or `[i]`.
fn dotted(rest: &str) -> String {
    if rest.is_empty() || rest.starts_with('[') {
        rest.to_owned()
    } else {
        format!(".{rest}")
    }
}

/// Percent-encodes `text` for a URL path segment or query value: everything but RFC 3986's
/// unreserved characters. Request keys contain `/`, cursors `:` and `+`.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_integer_beyond_two_to_the_53_is_found_by_its_path() {
        let exact = serde_json::json!({ "amount": 9_007_199_254_740_992_u64, "n": -3 });
        assert_eq!(inexact_integer(&exact), None);
        let beyond =
            serde_json::json!({ "items": [{ "qty": 1 }, { "qty": 9_007_199_254_740_993_u64 }] });
        assert_eq!(inexact_integer(&beyond).as_deref(), Some("items[1].qty"));
        assert_eq!(
            inexact_integer(&serde_json::json!(-9_007_199_254_740_993_i64)).as_deref(),
            Some("")
        );
    }

    #[test]
    fn a_request_key_is_derived_from_workflow_and_step_and_never_changes() {
        let workflow = Uuid::parse_str("0191f3c2-7d4e-7a41-9a7e-1f2a3b4c5d6e").unwrap();
        let step = StepKey::new("deliver", 1);
        let key = RequestKey::derive(workflow, &step);
        assert_eq!(
            key.as_str(),
            "w-0191f3c27d4e7a419a7e1f2a3b4c5d6e/deliver-v1"
        );
        assert_eq!(key, RequestKey::derive(workflow, &step));
    }

    #[test]
    fn a_replacement_gets_a_new_key_linked_to_the_original() {
        let original = RequestKey::from("w-1/deliver-v1".to_owned());
        let replacement = RequestKey::replacement(&original, 1);
        assert_ne!(replacement, original);
        assert!(replacement.as_str().starts_with(original.as_str()));
    }

    #[test]
    fn the_digest_ignores_key_order_and_whitespace_but_not_values() {
        let a: serde_json::Value = serde_json::from_str(r#"{"b": 1, "a": "x"}"#).unwrap();
        let b: serde_json::Value = serde_json::from_str(r#"{"a":"x","b":1}"#).unwrap();
        let c: serde_json::Value = serde_json::from_str(r#"{"a":"y","b":1}"#).unwrap();
        assert_eq!(InputDigest::of_json(&a), InputDigest::of_json(&b));
        assert_ne!(InputDigest::of_json(&a), InputDigest::of_json(&c));
        assert!(InputDigest::parse(InputDigest::of_json(&a).as_str()).is_some());
    }

    #[test]
    fn only_well_formed_digests_parse() {
        assert!(InputDigest::parse("sha256:abc").is_none());
        assert!(InputDigest::parse(&format!("md5:{}", "0".repeat(64))).is_none());
        assert!(InputDigest::parse(&format!("sha256:{}", "A".repeat(64))).is_none());
    }
}
