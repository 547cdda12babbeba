//! The boundary to external destinations. An adapter declares its [`SideEffectContract`] and
//! reports what the transport saw; it never decides whether to try again.

mod http;

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use crate::definition::PreparedRequest;
use crate::domain::{RequestKey, SideEffectContract, TransportObservation};

pub use http::HttpAdapter;

/// A boxed future, so adapters can live behind `dyn Adapter`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a status lookup by client reference saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "seen", rename_all = "snake_case")]
pub enum LookupObservation {
    /// The destination holds the request; `all` lists every reference it holds for it.
    Found {
        external_reference: String,
        digest: String,
        all: Vec<String>,
    },
    /// The destination holds it under another digest.
    FoundWithConflictingDigest {
        external_reference: String,
        digest: String,
    },
    NotFound,
    Processing,
    Unavailable {
        detail: String,
    },
    /// The adapter has no lookup.
    NotSupported,
}

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

/// One destination, reached through its declared contract.
pub trait Adapter: Send + Sync {
    /// What this adapter can prove; trusted only once its contract suite passed.
    fn contract(&self) -> &SideEffectContract;

    /// Sends `request` under `key`, within the contract's deadline.
    fn deliver<'a>(
        &'a self,
        key: &'a RequestKey,
        request: &'a PreparedRequest,
    ) -> BoxFuture<'a, TransportObservation>;

    /// Asks the destination about `key` (its client reference), comparing with `digest`.
    fn lookup<'a>(
        &'a self,
        key: &'a RequestKey,
        digest: &'a str,
    ) -> BoxFuture<'a, LookupObservation>;

    /// Requests withdrawal of `external_reference` under its own key.
    fn withdraw<'a>(
        &'a self,
        key: &'a RequestKey,
        external_reference: &'a str,
    ) -> BoxFuture<'a, WithdrawalObservation>;
}
