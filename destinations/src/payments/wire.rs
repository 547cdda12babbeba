//! The bodies the payments API answers with, as written down in `PAYMENTS.md`. Every type both
//! serialises and deserialises, so tests and harnesses read the answers with the definitions
//! the destination writes them with.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The header that carries a request's idempotency key.
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";

/// The header a replayed answer carries, with the value `true`.
pub const IDEMPOTENT_REPLAYED_HEADER: &str = "idempotent-replayed";

/// The longest idempotency key accepted (Stripe's limit).
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// A customer whose card is always declined (`generic_decline`).
pub const DECLINED_CUSTOMER: &str = "cus_declined";

/// A customer whose card is always declined for `insufficient_funds`.
pub const INSUFFICIENT_FUNDS_CUSTOMER: &str = "cus_insufficient";

/// The message of an idempotency key reused with other parameters.
pub const KEY_IN_USE_MESSAGE: &str = "Keys for idempotent requests can only be used with the same parameters they were first used with.";

/// A charge: the answer to `POST /v1/charges` and `GET /v1/charges/{id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charge {
    /// `ch_` and 24 letters and digits.
    pub id: String,
    /// Always `charge`.
    pub object: String,
    /// In the currency's smallest unit.
    pub amount: i64,
    /// Three lowercase letters.
    pub currency: String,
    /// `succeeded`, or `failed` for a declined attempt (kept as a charge, as Stripe keeps it).
    pub status: String,
    /// Why a `failed` charge failed (its decline code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_code: Option<String>,
    /// As given.
    pub description: Option<String>,
    /// As given.
    pub customer: Option<String>,
    /// The `metadata[KEY]` parameters.
    pub metadata: BTreeMap<String, String>,
    /// Seconds since the Unix epoch.
    pub created: i64,
    /// Whether the charge has been refunded.
    pub refunded: bool,
}

/// A refund: the answer to `POST /v1/refunds`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refund {
    /// `re_` and 24 letters and digits.
    pub id: String,
    /// Always `refund`.
    pub object: String,
    /// The charge refunded.
    pub charge: String,
    /// The charge's whole amount.
    pub amount: i64,
    /// Always `succeeded`.
    pub status: String,
    /// As given.
    pub reason: Option<String>,
    /// Seconds since the Unix epoch.
    pub created: i64,
}

/// The answer to `GET /v1/charges/search`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchResult {
    /// Always `search_result`.
    pub object: String,
    /// The visible matching charges, newest first, at most 100.
    pub data: Vec<Charge>,
    /// Whether more than 100 matched.
    pub has_more: bool,
    /// Always `/v1/charges/search`.
    pub url: String,
}

/// The answer to `GET /v1/charges`: a page of a list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChargeList {
    /// Always `list`.
    pub object: String,
    /// The page's charges, in the list's order.
    pub data: Vec<Charge>,
    /// Whether the list goes on after this page (ask again `starting_after` its last id).
    pub has_more: bool,
    /// Always `/v1/charges`.
    pub url: String,
}

/// Every answer that is not a success: `{"error": {…}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// The `error` of an [`ErrorBody`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// `invalid_request_error`, `card_error`, `idempotency_error`, `rate_limit_error` or
    /// `api_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// A stable code, e.g. `card_declined`; absent on `api_error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Why a card was declined (`card_error` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decline_code: Option<String>,
    /// The parameter at fault, if one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// The failed charge a decline left behind (`card_error` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charge: Option<String>,
    /// For people.
    pub message: String,
}
