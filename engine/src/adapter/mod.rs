//! The boundary to external destinations. An adapter declares its [`SideEffectContract`] and
//! reports what the transport saw; it never decides whether to try again.
//!
//! [`spec`] reads adapter files (one YAML file per API) and [`DataAdapter`] calls the API they
//! describe; [`protocol`] holds the files of the three kinds of `destinations/PROTOCOL.md` and
//! [`contracts`] the contracts they declare; [`secret`] keeps the secrets files name;
//! [`contract_suite`] verifies a contract against the live destination; and [`registry`] loads
//! the registered adapters, trusting each only once its suite passed (docs/DESIGN.md §5).

mod answer;
pub mod apply;
pub mod contract_suite;
pub mod contracts;
mod data;
pub mod policy;
pub mod protocol;
pub mod registry;
pub mod secret;
pub mod spec;

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

pub use crate::domain::LookupObservation;
use crate::domain::{InputDigest, RequestKey, SideEffectContract, TransportObservation};

pub use answer::MAX_RESPONSE_BYTES;
pub use data::DataAdapter;
pub use secret::{Secret, SecretError, SecretRef};
pub use spec::AdapterSpec;

/// Where the W3C `traceparent` of the current span comes from; set once by a process that
/// exports traces (the engine itself knows no tracing backend).
static TRACE_CONTEXT: OnceLock<fn() -> Option<String>> = OnceLock::new();

/// Names the function that gives the `traceparent` header for the current span (`None`
/// outside a traced span). Every call to a destination then carries it, so a destination that
/// traces too joins the step attempt's trace. Only the first call in a process counts.
pub fn set_trace_context(source: fn() -> Option<String>) {
    let _ = TRACE_CONTEXT.set(source);
}

/// The `traceparent` header for the current span, when a process set a source and is tracing.
pub(crate) fn traceparent() -> Option<String> {
    TRACE_CONTEXT.get().and_then(|source| source())
}

/// A boxed future, so adapters can live behind `dyn Adapter`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a withdrawal request saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "seen", rename_all = "snake_case")]
pub enum WithdrawalObservation {
    Withdrawn {
        withdrawal_reference: String,
        limits: String,
    },
    /// As for deliveries: the transport failed in a way that says nothing about the effect.
    Transport(TransportObservation),
}

impl WithdrawalObservation {
    /// The withdrawal as the step's call observed it: a withdrawal made is an accepted call
    /// whose external reference is the withdrawal's.
    pub fn into_transport(self) -> TransportObservation {
        match self {
            WithdrawalObservation::Withdrawn {
                withdrawal_reference,
                ..
            } => TransportObservation::Accepted {
                status: 201,
                external_reference: withdrawal_reference,
                replayed: false,
                fields: Default::default(),
            },
            WithdrawalObservation::Transport(observation) => observation,
        }
    }
}

/// A request ready to send: the exact request, what Z29C records of it, and its digests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreparedRequest {
    /// What Z29C records and recovery compares: the canonical request without secrets (auth
    /// is added only when sending). Its `digest` field, where present, is `content_digest`.
    pub summary: serde_json::Value,
    /// What goes over the wire, secrets aside.
    pub wire: Wire,
    /// The digest the destination compares under one key: the delivered content's digest.
    pub content_digest: InputDigest,
    /// The digest of `summary`, bound to the request key forever.
    pub request_digest: InputDigest,
    /// The step's request as the definition rendered it, before the adapter shaped it for the
    /// wire: what a lookup's templates read as `request` (null for a withdrawal).
    #[serde(default)]
    pub request: serde_json::Value,
}

/// An HTTP request without its secrets, relative to the adapter's base URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wire {
    pub method: String,
    /// The path, already percent-encoded where it carries values.
    pub path: String,
    pub query: Vec<(String, String)>,
    /// Headers that carry no secret (auth headers are added when sending).
    pub headers: Vec<(String, String)>,
    pub body: WireBody,
}

/// The body of a [`Wire`] request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireBody {
    None,
    Json(serde_json::Value),
    /// `application/x-www-form-urlencoded` pairs, sorted by name.
    Form(Vec<(String, String)>),
}

/// Why an adapter could not build a request from what it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PrepareError(pub String);

/// One destination, reached through the contract verification proved.
pub trait Adapter: Send + Sync {
    /// What this adapter has proven it can do (docs/DESIGN.md §5).
    fn contract(&self) -> &SideEffectContract;

    /// How much may reach the destination, as the adapter's file declares it (docs/DESIGN.md
    /// §20); unlimited unless it says.
    fn limits(&self) -> crate::domain::Limits {
        crate::domain::Limits::default()
    }

    /// The exact request that carries a step's rendered `request` under `key`, with the digest
    /// the destination compares (`content_digest`). Deterministic: the same arguments give the
    /// same bytes, so recovery can regenerate it and compare digests before sending again.
    fn prepare(
        &self,
        key: &RequestKey,
        request: &serde_json::Value,
        content_digest: &InputDigest,
    ) -> Result<PreparedRequest, PrepareError>;

    /// The exact request that withdraws `external_reference` under `key`.
    fn prepare_withdrawal(
        &self,
        key: &RequestKey,
        external_reference: &str,
    ) -> Result<PreparedRequest, PrepareError>;

    /// Sends `request` under `key`, within the contract's deadline.
    fn deliver<'a>(
        &'a self,
        key: &'a RequestKey,
        request: &'a PreparedRequest,
    ) -> BoxFuture<'a, TransportObservation>;

    /// Asks the destination about `key` (its client reference), comparing with `digest`;
    /// `request` is the step's request as it was rendered when its identity was bound.
    fn lookup<'a>(
        &'a self,
        key: &'a RequestKey,
        digest: &'a str,
        request: &'a serde_json::Value,
    ) -> BoxFuture<'a, LookupObservation>;

    /// Whether the lookup reads the step's request (a lookup by customer, by order): the
    /// caller then regenerates it and proves it is the one bound to the key.
    fn lookup_reads_request(&self) -> bool {
        false
    }

    /// Requests withdrawal of `external_reference` under its own key.
    fn withdraw<'a>(
        &'a self,
        key: &'a RequestKey,
        external_reference: &'a str,
    ) -> BoxFuture<'a, WithdrawalObservation>;
}
