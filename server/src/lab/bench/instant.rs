//! The engine bench's in-process destination.

use engine::adapter::{
    Adapter, BoxFuture, LookupObservation, PrepareError, PreparedRequest, Wire, WireBody,
    WithdrawalObservation,
};
use engine::domain::{InputDigest, RequestKey, SideEffectContract, TransportObservation};
use serde_json::{Value, json};

/// A destination that answers at once, in process: what remains is Z29C's own cost.
pub(super) struct InstantDestination {
    pub(super) contract: SideEffectContract,
}

impl Adapter for InstantDestination {
    fn contract(&self) -> &SideEffectContract {
        &self.contract
    }

    fn prepare(
        &self,
        key: &RequestKey,
        request: &Value,
        content_digest: &InputDigest,
    ) -> Result<PreparedRequest, PrepareError> {
        Ok(in_process(json!({
            "key": key.as_str(),
            "request": request,
            "digest": content_digest,
        })))
    }

    fn prepare_withdrawal(
        &self,
        key: &RequestKey,
        external_reference: &str,
    ) -> Result<PreparedRequest, PrepareError> {
        Ok(in_process(
            json!({ "key": key.as_str(), "withdraw": external_reference }),
        ))
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
                fields: Default::default(),
            }
        })
    }

    fn lookup<'a>(
        &'a self,
        _: &'a RequestKey,
        _: &'a str,
        _: &'a Value,
    ) -> BoxFuture<'a, LookupObservation> {
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

/// A request that never leaves the process, recorded as `summary`.
fn in_process(summary: Value) -> PreparedRequest {
    let digest = InputDigest::of_json(&summary);
    PreparedRequest {
        wire: Wire {
            method: "POST".to_owned(),
            path: "/".to_owned(),
            query: Vec::new(),
            headers: Vec::new(),
            body: WireBody::Json(summary.clone()),
        },
        content_digest: summary["digest"]
            .as_str()
            .and_then(InputDigest::parse)
            .unwrap_or_else(|| digest.clone()),
        request_digest: digest,
        request: Value::Null,
        summary,
    }
}
