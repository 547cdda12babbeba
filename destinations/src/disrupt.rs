//! Runs a request's work under the fault script, the same way for every API: each API only
//! words the faults that answer instead of the work.

use std::time::Duration;

use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::faults::{Fault, Operation, Request};
use crate::script::Faults;
use crate::state::DropConnection;

/// How an API answers the faults that replace or spoil its own answer.
pub(crate) trait FaultWords {
    /// `refuse`: nothing was done, and the answer says so.
    fn refused(&self, operation: Operation) -> Response;
    /// `reject`: nothing was done, for this reason.
    fn rejected(&self, operation: Operation, code: String, retryable: bool) -> Response;
    /// `lookup_unavailable`.
    fn lookup_unavailable(&self) -> Response;
    /// `lookup_processing`.
    fn lookup_processing(&self) -> Response;
    /// `error_after_accept`: the work was done, and the answer must not say so.
    fn server_error(&self, status: StatusCode) -> Response;
}

/// Runs `work` under the fault script: not at all (refusals, rejections, scripted lookup
/// answers, a lost request), or fully and then spoiling its answer (delay, drop, server error).
pub(crate) async fn disrupted<R: IntoResponse>(
    faults: &Faults,
    request: Request<'_>,
    words: &impl FaultWords,
    work: impl Future<Output = R>,
) -> Response {
    let Some(fault) = faults.decide(&request) else {
        return work.await.into_response();
    };
    let (operation, subject) = (request.operation, request.subject());
    tracing::debug!(?fault, %operation, subject, "fault fires");
    match fault {
        Fault::Refuse {} => words.refused(operation),
        Fault::Reject { code, retryable } => words.rejected(operation, code, retryable),
        Fault::LookupUnavailable {} => words.lookup_unavailable(),
        Fault::LookupProcessing {} => words.lookup_processing(),
        Fault::DelayResponse { ms } | Fault::WithdrawalTimeout { ms } => {
            let response = work.await.into_response();
            tokio::time::sleep(Duration::from_millis(ms)).await;
            response
        }
        Fault::DropResponse {} | Fault::WithdrawalDrop {} => {
            let mut response = work.await.into_response();
            response.extensions_mut().insert(DropConnection);
            response
        }
        Fault::LoseRequest {} => {
            let mut response = words.refused(operation);
            response.extensions_mut().insert(DropConnection);
            response
        }
        Fault::ErrorAfterAccept { status } => {
            let _done = work.await;
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            words.server_error(status)
        }
    }
}
