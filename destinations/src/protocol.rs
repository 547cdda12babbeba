//! The bodies exchanged over HTTP, as written down in `PROTOCOL.md`.
//!
//! Every type both serialises and deserialises, so tests and the scenario harness can read
//! the destination's answers with the same definitions the destination writes them with.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::kind::Kind;

/// The header that carries the client's idempotency key.
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";

/// The stated limits of every withdrawal.
pub const WITHDRAWAL_LIMITS: &str = "a withdrawn document may already have been read";

/// The longest client reference, recipient or idempotency key accepted.
pub const MAX_REFERENCE_LEN: usize = 200;

/// The longest summary accepted.
pub const MAX_SUMMARY_LEN: usize = 2000;

/// Problem codes a client can act upon.
pub mod code {
    /// The body, a header or a path parameter could not be read (400).
    pub const MALFORMED_REQUEST: &str = "malformed_request";
    /// A body not declared `Content-Type: application/json` (415).
    pub const NOT_JSON: &str = "not_json";
    /// A test-only endpoint called without the control token (401).
    pub const CONTROL_TOKEN_REQUIRED: &str = "control_token_required";
    /// The idempotent kind was sent a request without `Idempotency-Key` (400).
    pub const MISSING_IDEMPOTENCY_KEY: &str = "missing_idempotency_key";
    /// The key was first used for another request (422).
    pub const IDEMPOTENCY_KEY_CONFLICT: &str = "idempotency_key_conflict";
    /// Refused before acceptance; nothing was committed (503).
    pub const UNAVAILABLE: &str = "unavailable";
    /// No delivery with that external reference (404).
    pub const UNKNOWN_DELIVERY: &str = "unknown_delivery";
    /// This kind offers no lookup by client reference (501).
    pub const LOOKUP_NOT_SUPPORTED: &str = "lookup_not_supported";
    /// A fault plan the destination cannot obey (400).
    pub const INVALID_FAULT_PLAN: &str = "invalid_fault_plan";
    /// No such endpoint (404).
    pub const NOT_FOUND: &str = "not_found";
    /// Something failed; the client learns nothing about the effect (5xx).
    pub const INTERNAL_ERROR: &str = "internal_error";
}

/// The answer to `GET /`: what this destination offers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Description {
    /// The destination's kind.
    pub kind: Kind,
    /// The status-index lag, for the queryable kind only.
    pub visibility_window_ms: Option<u64>,
    /// The capabilities, spelt out so a client need not derive them from the kind.
    pub supports: Supports,
}

/// The capabilities in a [`Description`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Supports {
    /// Creation is deduplicated by `Idempotency-Key`.
    pub idempotency_key: bool,
    /// Deliveries can be looked up by client reference.
    pub lookup: bool,
    /// Deliveries can be withdrawn (always true).
    pub withdrawal: bool,
}

/// The body of `POST /deliveries`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliveryRequest {
    /// The client's own reference for the effect, used by lookups.
    pub client_reference: String,
    /// `sha256:` and 64 lowercase hex digits: the digest of the client's canonical input.
    pub digest: String,
    /// Who the document is for.
    pub recipient: String,
    /// A short, redacted description of the document.
    pub summary: String,
}

/// The domain of the test-mode recipients (`PROTOCOL.md`, "Sandbox values").
pub const SANDBOX_DOMAIN: &str = "@sandbox.invalid";

/// What a test-mode recipient asks the destination to answer, as a test card asks a payments
/// sandbox: a refusal before anything is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxAnswer {
    /// `rejected+CODE@sandbox.invalid`: a domain rejection with CODE (`422`).
    Rejected(String),
    /// `unavailable@sandbox.invalid`: the destination is unavailable (`503`).
    Unavailable,
}

impl DeliveryRequest {
    /// The refusal a test-mode recipient asks for, if it is one.
    pub fn sandbox_answer(&self) -> Option<SandboxAnswer> {
        let local = self.recipient.strip_suffix(SANDBOX_DOMAIN)?;
        if local == "unavailable" {
            return Some(SandboxAnswer::Unavailable);
        }
        let code = local.strip_prefix("rejected+")?;
        let valid = !code.is_empty()
            && code.len() <= 64
            && code
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        valid.then(|| SandboxAnswer::Rejected(code.to_owned()))
    }

    /// Why the request cannot be accepted as it stands, if it cannot.
    pub fn problem(&self) -> Option<String> {
        if let Some(problem) = reference_problem("client_reference", &self.client_reference) {
            return Some(problem);
        }
        if !is_digest(&self.digest) {
            return Some("digest must be \"sha256:\" followed by 64 lowercase hex digits".into());
        }
        if let Some(problem) = reference_problem("recipient", &self.recipient) {
            return Some(problem);
        }
        if self.summary.chars().count() > MAX_SUMMARY_LEN {
            return Some(format!(
                "summary must be at most {MAX_SUMMARY_LEN} characters"
            ));
        }
        None
    }
}

/// Why `value` cannot serve as the reference-like field `field`, if it cannot.
pub(crate) fn reference_problem(field: &str, value: &str) -> Option<String> {
    let length = value.chars().count();
    (length == 0 || length > MAX_REFERENCE_LEN)
        .then(|| format!("{field} must be 1 to {MAX_REFERENCE_LEN} characters"))
}

/// Whether `digest` is `sha256:` followed by 64 lowercase hex digits.
pub fn is_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// A delivery as answered to its creator: 201 when just accepted, 200 on an idempotent replay.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    /// The destination's durable reference for the delivery, e.g. `x-82`.
    pub external_reference: String,
    /// The client reference the delivery was created with.
    pub client_reference: String,
    /// The digest the delivery was created with.
    pub digest: String,
    /// When the destination committed the delivery.
    pub accepted_at: DateTime<Utc>,
    /// True when this answer repeats the original result of an earlier request.
    pub replayed: bool,
}

/// Every answer that is not a success: `{"code", "message", "retryable"?, "accepted"?}`.
///
/// `accepted` is present only as `false`, and only when nothing was committed: the protocol's
/// promise. Its absence (as on a 5xx) tells the client nothing about the effect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// A stable code from [`code`], or a code chosen by a fault script.
    pub code: String,
    /// A human explanation; never driver or internal error text.
    pub message: String,
    /// Whether sending the same request again may succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// `Some(false)` when the destination promises nothing was committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<bool>,
}

/// The answer to `GET /deliveries/by-reference/{client_reference}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum LookupAnswer {
    /// A visible delivery has the reference (and the asked digest, if one was asked).
    Found {
        /// The earliest visible delivery with the reference.
        external_reference: String,
        /// Its digest.
        digest: String,
        /// When it was accepted.
        accepted_at: DateTime<Utc>,
        /// Every visible delivery with the reference, earliest first: more than one means the
        /// reference was used for several creations.
        all: Vec<String>,
    },
    /// A visible delivery has the reference but another digest than the one asked about.
    FoundWithConflictingDigest {
        /// The earliest visible delivery with the reference.
        external_reference: String,
        /// The digest stored with it.
        digest: String,
        /// Every visible delivery with the reference, earliest first.
        all: Vec<String>,
    },
    /// No visible delivery has the reference. Deliveries accepted less than
    /// `visibility_window_ms` ago are not visible yet, so this proves absence only for
    /// requests sent longer ago than that.
    NotFound {
        /// The status-index lag.
        visibility_window_ms: u64,
    },
    /// The destination is still working out the answer; ask again later.
    Processing,
    /// Lookups are unavailable (served with status 503); ask again later.
    Unavailable,
}

/// A withdrawal as answered: 201 when just recorded, 200 when it repeats an earlier one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Withdrawn {
    /// The destination's reference for the withdrawal itself, e.g. `w-5`.
    pub withdrawal_reference: String,
    /// The delivery withdrawn.
    pub external_reference: String,
    /// When the withdrawal was committed.
    pub withdrawn_at: DateTime<Utc>,
    /// What a withdrawal cannot undo: [`WITHDRAWAL_LIMITS`].
    pub limits: String,
    /// True when this answer repeats an earlier withdrawal of the delivery.
    pub replayed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lowercase_sha256_digests_of_the_right_length_are_digests() {
        let hex = "0123456789abcdef".repeat(4);
        assert!(is_digest(&format!("sha256:{hex}")));
        assert!(!is_digest(&hex));
        assert!(!is_digest(&format!("sha256:{}", hex.to_uppercase())));
        assert!(!is_digest(&format!("sha256:{hex}0")));
        assert!(!is_digest(&format!("md5:{hex}")));
    }

    #[test]
    fn lookup_answers_are_tagged_by_status() {
        let answer = serde_json::to_value(LookupAnswer::Processing).unwrap();
        assert_eq!(answer, serde_json::json!({"status": "processing"}));
        let answer = LookupAnswer::NotFound {
            visibility_window_ms: 1500,
        };
        assert_eq!(
            serde_json::to_value(answer).unwrap(),
            serde_json::json!({"status": "not_found", "visibility_window_ms": 1500})
        );
    }
}
