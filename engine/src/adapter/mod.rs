//! The boundary to external destinations. An adapter declares its [`SideEffectContract`] and
//! reports what the transport saw; it never decides whether to try again.
//!
//! [`http`] speaks the destination protocol; [`contracts`] holds the contracts the destination
//! kinds declare; [`contract_suite`] verifies a contract against the live destination; and
//! [`registry`] loads the registered adapters, trusting each only once its suite passed
//! (docs/DESIGN.md §5).

pub mod contract_suite;
pub mod contracts;
mod http;
pub mod registry;

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use crate::definition::PreparedRequest;
pub use crate::domain::LookupObservation;
use crate::domain::{RequestKey, SideEffectContract, TransportObservation};

pub use http::HttpAdapter;

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
