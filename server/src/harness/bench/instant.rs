//! The engine bench's in-process destination.

use engine::adapter::{Adapter, BoxFuture, LookupObservation, WithdrawalObservation};
use engine::definition::PreparedRequest;
use engine::domain::{RequestKey, SideEffectContract, TransportObservation};

/// A destination that answers at once, in process: what remains is Z29C's own cost.
pub(super) struct InstantDestination {
    pub(super) contract: SideEffectContract,
}

impl Adapter for InstantDestination {
    fn contract(&self) -> &SideEffectContract {
        &self.contract
    }

    fn deliver<'a>(
        &'a self,
        key: &'a RequestKey,
        _: &'a PreparedRequest,
    ) -> BoxFuture<'a, TransportObservation> {
        Box::pin(async move {
            TransportObservation::Accepted {
                status: 201,
                external_reference: format!("x-{}", key.as_str()),
                replayed: false,
            }
        })
    }

    fn lookup<'a>(&'a self, _: &'a RequestKey, _: &'a str) -> BoxFuture<'a, LookupObservation> {
        Box::pin(async { LookupObservation::NotFound })
    }

    fn withdraw<'a>(
        &'a self,
        key: &'a RequestKey,
        _: &'a str,
    ) -> BoxFuture<'a, WithdrawalObservation> {
        Box::pin(async move {
            WithdrawalObservation::Withdrawn {
                withdrawal_reference: format!("w-{}", key.as_str()),
                limits: String::new(),
            }
        })
    }
}
