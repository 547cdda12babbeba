//! Adapter files: one YAML file per API, from which the adapter, its capability contract and
//! its receipt fields are derived — no Rust code per API (docs/DESIGN.md §16).
//!
//! [`AdapterSpec::parse`] reads a file and runs every static check, refusing it with a
//! [`FileError`] that names the line where it can. Unknown fields are refused everywhere.
//!
//! ```yaml
//! name: payments                      # ^[a-z0-9][a-z0-9_-]{0,62}$
//! description: Charges cards through a Stripe-style API.   # optional
//! base_url: http://127.0.0.1:4104     # or { env: PAYMENTS_URL } (resolved when the adapter is built)
//! deadline_ms: 5000                   # default 2000
//! auth:                               # optional; exactly one of:
//!   bearer: { env: Z29C_PAYMENTS_API_KEY }            # secret refs: { env: NAME } or { file: /path }
//!   # basic: { username: { env: U }, password: { env: P } }
//!   # header: { name: X-Api-Key, value: { env: K } }
//!   # hmac_sha256: { header: X-Signature, prefix: "sha256=", secret: { env: S } }  # over the exact body bytes
//! idempotency:                        # optional: the destination deduplicates by key
//!   header: Idempotency-Key
//!   retention: 24h                    # how long the provider keeps keys: "90s", "30m", "24h", "7d"
//! unknown_outcome_policy: query       # or review (default query)
//! deliver:
//!   method: POST
//!   path: /v1/charges                 # a template; values are percent-encoded with `| urlencode`
//!   query: {}                         # optional map of templates
//!   headers: {}                       # optional non-secret headers (templates)
//!   form:                             # or `json:` (a template tree) — exactly one, or neither
//!     amount: "{{ request.amount }}"
//!     "metadata[z29c_key]": "{{ key }}"
//!     "metadata[z29c_digest]": "{{ digest }}"
//!   outcomes:                         # first matching rule wins; NOTHING matched = outcome unknown
//!     - when: "status == 200"
//!       succeeded:
//!         reference: "body.id"                          # expression
//!         replayed: "headers['idempotent-replayed'] == 'true'"   # optional expression
//!         fields: { amount: "body.amount" }            # typed receipt fields (expressions)
//!     - when: "status == 402"
//!       rejected: { code: "body.error.code" }
//!     - when: "status == 400 and body.error.type == 'invalid_request_error'"
//!       failed_before_effect: { code: "body.error.code" }   # only where the API promises nothing happened
//!   retryable: [rate_limited]         # rejection codes after which another attempt may succeed
//! lookup:                             # optional
//!   method: GET
//!   path: /v1/charges/search
//!   query: { query: "metadata['z29c_key']:'{{ key }}'" }
//!   visibility_window_ms: 2000        # REQUIRED when lookup is present
//!   create_after_authoritative_absence: true   # default false
//!   found: { when: "...", reference: "...", digest: "...", all: "..." }   # digest compared with the bound content digest; `all` (optional) the list of every matching reference
//!   processing: "..."                 # optional condition
//!   not_found: "..."                  # condition
//!   # anything else: unavailable
//! withdraw:                           # optional: compensation
//!   method: POST
//!   path: /v1/refunds
//!   form: { charge: "{{ reference }}" }
//!   limits: "A refund returns the money; the card statement still shows the charge."   # required
//!   outcomes:
//!     - when: "status == 200"
//!       withdrawn: { reference: "body.id" }
//! verify:
//!   probe: { amount: 100, currency: eur }   # the `request` the contract suite sends (required when any claim needs proof)
//! ```
//!
//! What templates and expressions see:
//! - deliver request templates: `request` (the step's rendered request), `key` (the request key)
//!   and `digest` (the content digest);
//! - withdraw request templates: `key`, `reference` (the external reference to withdraw) and
//!   `digest` (the withdrawal's content digest);
//! - lookup request templates: `key` and `digest` (the bound content digest);
//! - outcome rules and lookup mappings: `status` (a number), `headers` (a map, lowercase names),
//!   `body` (the parsed JSON answer, or null when it is not JSON), `key` and `digest`.
//!
//! A lone `{{ expression }}` keeps its type; any other template renders to a string
//! ([`crate::template`]). Rule fields (`when`, `reference`, `code`, …) are bare expressions.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::secret::SecretRef;
use crate::domain::{Compensation, SideEffectContract, UnknownOutcomePolicy};
use crate::file_error::FileError;

mod check;
mod text;
mod verify;

pub use text::{Expression, Lets, Retention, Span, Template};
pub use verify::{Expected, Provocation, Verify};

/// How long before a provider's idempotency retention ends Z29C stops replaying a key. A
/// replay decided just inside the retention can still reach the provider after it: the
/// decision, a queue, backoff and the call's own deadline all take time, and the provider's
/// clock is not Z29C's. Past `retention − REPLAY_MARGIN` the provider may already have
/// forgotten the key, so a same-key retry could create the effect again.
pub const REPLAY_MARGIN: Duration = Duration::from_millis(crate::domain::REPLAY_MARGIN_MS);

/// The default deadline of one call, when the file names none.
pub const DEFAULT_DEADLINE_MS: u64 = 2_000;

/// One adapter file (see the module documentation for the format).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterSpec {
    #[serde(deserialize_with = "text::name")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub base_url: BaseUrl,
    #[serde(default = "default_deadline")]
    pub deadline_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<Auth>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency: Option<Idempotency>,
    #[serde(default = "default_policy")]
    pub unknown_outcome_policy: UnknownOutcomePolicy,
    /// How often a step is sent again while every attempt fails before any effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
    pub deliver: Deliver,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookup: Option<Lookup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdraw: Option<Withdraw>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Verify>,
    /// Hold the adapter automatically when its provider is in trouble.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<Breaker>,
    /// How much may reach the provider: new requests per second and calls in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::domain::Limits>,
    /// Actions on its steps that need two approvers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub four_eyes: Option<FourEyes>,
}

fn default_deadline() -> u64 {
    DEFAULT_DEADLINE_MS
}

fn default_policy() -> UnknownOutcomePolicy {
    UnknownOutcomePolicy::Query
}

/// The API's base URL, written out or taken from the environment when the adapter is built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BaseUrl {
    Literal(String),
    Env { env: String },
}

impl BaseUrl {
    /// The base URL as the file writes it: a reference stays a reference, never what it holds
    /// (what is stored and shown).
    pub fn as_written(&self) -> String {
        match self {
            BaseUrl::Literal(url) => url.trim_end_matches('/').to_owned(),
            BaseUrl::Env { env } => format!("{{ env: {env} }}"),
        }
    }
}

/// How requests authenticate. Secrets are added only when sending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "text::AuthFile", into = "text::AuthFile")]
pub enum Auth {
    /// `Authorization: Bearer <secret>`.
    Bearer(SecretRef),
    /// `Authorization: Basic …`.
    Basic {
        username: SecretRef,
        password: SecretRef,
    },
    /// A named header carrying the secret.
    Header { name: String, value: SecretRef },
    /// `header: <prefix><hex HMAC-SHA256 of the exact body bytes>`.
    HmacSha256 {
        header: String,
        #[serde(default)]
        prefix: String,
        secret: SecretRef,
    },
}

/// The destination deduplicates by key: the header carrying it, and how long keys are kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Idempotency {
    pub header: String,
    /// How long the provider keeps keys; absent: for as long as it keeps the effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Retention>,
}

/// How many attempts a step makes while each fails before any effect (the connection refused,
/// an answer a verified rule reads as `failed_before_effect`), and how long it waits between
/// them: `backoff` doubling per attempt up to `max_backoff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retry {
    pub attempts: u32,
    #[serde(default = "default_backoff")]
    pub backoff: Span,
    #[serde(default = "default_max_backoff")]
    pub max_backoff: Span,
}

/// The automatic hold (docs/DESIGN.md §20): after `trips_after` attempts ended outcome unknown
/// or with a 5xx answer within `within`, the adapter is held until a person resumes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Breaker {
    pub trips_after: u32,
    #[serde(default = "default_breaker_window")]
    pub within: Span,
}

/// Four eyes (docs/DESIGN.md §20): each of `actions` on this adapter's steps is proposed by
/// one approver and carried out only when a different person confirms it within
/// `expires_after`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FourEyes {
    pub actions: Vec<crate::domain::OperatorAction>,
    #[serde(default = "default_proposal_expiry")]
    pub expires_after: Span,
}

fn default_proposal_expiry() -> Span {
    Span(Duration::from_secs(3600))
}

fn default_breaker_window() -> Span {
    Span(Duration::from_secs(60))
}

fn default_backoff() -> Span {
    Span(Duration::from_millis(200))
}

fn default_max_backoff() -> Span {
    Span(Duration::from_secs(30))
}

/// The `deliver` operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deliver {
    pub method: String,
    pub path: Template,
    #[serde(default)]
    pub query: BTreeMap<String, Template>,
    #[serde(default)]
    pub headers: BTreeMap<String, Template>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<BTreeMap<String, serde_json::Value>>,
    pub outcomes: Vec<Rule>,
    #[serde(default)]
    pub retryable: Vec<String>,
}

/// The `withdraw` operation: compensation, with what it cannot undo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Withdraw {
    pub method: String,
    pub path: Template,
    #[serde(default)]
    pub query: BTreeMap<String, Template>,
    #[serde(default)]
    pub headers: BTreeMap<String, Template>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<String>,
    pub outcomes: Vec<Rule>,
}

/// The `lookup` operation and how its answers map to what a lookup saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lookup {
    pub method: String,
    pub path: Template,
    #[serde(default)]
    pub query: BTreeMap<String, Template>,
    #[serde(default)]
    pub headers: BTreeMap<String, Template>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility_window_ms: Option<u64>,
    #[serde(default)]
    pub create_after_authoritative_absence: bool,
    /// How long the whole lookup (every page) may take; the adapter's deadline when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// A lookup that walks a list page by page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<Pages>,
    /// Sub-expressions named once, each reading the answer and the names before it.
    #[serde(default, rename = "let", skip_serializing_if = "Lets::is_empty")]
    pub lets: Lets,
    pub found: Found,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processing: Option<Expression>,
    pub not_found: Expression,
}

/// How a lookup walks a list: what each page adds to `items`, the cursor of the next page
/// (`none` when there is none), the page size its request reads as `page.size`, and how many
/// pages it may walk before it gives up (the answer is then unavailable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pages {
    pub items: Expression,
    pub next: Expression,
    #[serde(default = "default_page_size")]
    pub size: u32,
    #[serde(default = "default_max_pages")]
    pub max: u32,
}

fn default_page_size() -> u32 {
    100
}

fn default_max_pages() -> u32 {
    20
}

/// When a lookup answer is "found", and where its reference, digest and list of references are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Found {
    pub when: Expression,
    pub reference: Expression,
    pub digest: Expression,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<Expression>,
}

/// One outcome rule: a condition and exactly one conclusion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub when: Expression,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<Succeeded>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<Code>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_before_effect: Option<Code>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdrawn: Option<Withdrawn>,
}

/// A success and its receipt mapping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Succeeded {
    pub reference: Expression,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replayed: Option<Expression>,
    #[serde(default)]
    pub fields: BTreeMap<String, Expression>,
}

/// Where a rejection's or a refusal's code is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Code {
    pub code: Expression,
}

/// A recorded withdrawal and where its reference is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Withdrawn {
    pub reference: Expression,
}

impl AdapterSpec {
    /// Parses an adapter file and runs every static check.
    pub fn parse(source: &str) -> Result<AdapterSpec, FileError> {
        text::take_refused();
        let spec: AdapterSpec = crate::yaml::from_str(source).map_err(|e| {
            let mut error = FileError::from_yaml(&e);
            if let Some(line) =
                text::take_refused().and_then(|t| crate::file_error::line_of(source, &t))
            {
                error.line = Some(line);
                error.column = None;
            }
            error
        })?;
        check::check(&spec, source)?;
        Ok(spec)
    }

    /// Every secret the file names, in the order auth names them.
    pub fn secrets(&self) -> Vec<SecretRef> {
        match &self.auth {
            None => Vec::new(),
            Some(Auth::Bearer(secret)) => vec![secret.clone()],
            Some(Auth::Basic { username, password }) => vec![username.clone(), password.clone()],
            Some(Auth::Header { value, .. }) => vec![value.clone()],
            Some(Auth::HmacSha256 { secret, .. }) => vec![secret.clone()],
        }
    }

    /// The capability contract the file declares.
    pub fn contract(&self) -> SideEffectContract {
        SideEffectContract {
            accepts_idempotency_key: self.idempotency.is_some(),
            query_by_client_reference: self.lookup.is_some(),
            visibility_window_ms: self
                .lookup
                .as_ref()
                .and_then(|l| l.visibility_window_ms)
                .unwrap_or(0),
            create_after_authoritative_absence: self
                .lookup
                .as_ref()
                .is_some_and(|l| l.create_after_authoritative_absence),
            compensation: match self.withdraw.as_ref().and_then(|w| w.limits.clone()) {
                Some(limits) => Compensation::SupportedWithLimits(limits),
                None => Compensation::None,
            },
            unknown_outcome_policy: self.unknown_outcome_policy,
            retryable_rejections: self.deliver.retryable.clone(),
            deadline_ms: self.deadline_ms,
            retry: self.retry.map(|r| crate::domain::contract::RetrySchedule {
                attempts: r.attempts,
                backoff_ms: millis(r.backoff.0),
                max_backoff_ms: millis(r.max_backoff.0),
            }),
            idempotency_retention_ms: self
                .idempotency
                .as_ref()
                .and_then(|i| i.retention)
                .map(|r| millis(r.0)),
        }
    }

    /// The receipt fields a successful delivery provides: the three every receipt has, then
    /// the `succeeded.fields` of every rule.
    pub fn receipt_fields(&self) -> Vec<String> {
        let mut fields: Vec<String> = ["external_reference", "input_digest", "request_key"]
            .map(str::to_owned)
            .to_vec();
        for rule in &self.deliver.outcomes {
            for name in rule.succeeded.iter().flat_map(|s| s.fields.keys()) {
                if !fields.contains(name) {
                    fields.push(name.clone());
                }
            }
        }
        fields
    }
}

impl Rule {
    /// Whether the rule reads an answer as proof that nothing happened: a claim that must be
    /// proven before it counts.
    pub fn says_nothing_happened(&self) -> bool {
        self.rejected.is_some() || self.failed_before_effect.is_some()
    }
}

fn millis(span: Duration) -> u64 {
    u64::try_from(span.as_millis()).unwrap_or(u64::MAX)
}
