//! `POST /api/v1/proposals/{id}/confirm` and `/decline`: the second approver of an action an
//! adapter's file says needs two (docs/DESIGN.md §20), as the step page's forms and
//! `z29c proposal` go. The proposal pins the step's version it was made on: a step that moved
//! since answers 412; an `If-Match` (the version the confirmer read) is checked too.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use engine::operators::Operator;
use engine::recovery::four_eyes;
use serde::Deserialize;
use sqlx::PgPool;

use super::steps::{DoneBody, if_match, visible_evidence};
use super::{id_in, refusal, scoped};
use crate::http::client::{ApiClient, ApiError, ErrorBody};

/// Why the second approver decides as they do.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecideBody {
    /// Why, for the audit log and the waiver or authorization it makes (required).
    reason: String,
}

/// The proposal in the path, once the token may see its step and the step is still at the
/// version `If-Match` names (when it names one).
async fn proposal_of(
    client: &ApiClient,
    pool: &PgPool,
    id: Result<Path<String>, PathRejection>,
    headers: &HeaderMap,
) -> Result<uuid::Uuid, ApiError> {
    let id = id_in(id, "proposal")?;
    let proposal = engine::store::proposal::get(pool, id)
        .await?
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("no proposal {id}")))?;
    let seen = if_match(headers)?;
    if scoped(client) || seen.is_some() {
        let step = visible_evidence(client, pool, proposal.step).await?;
        if seen.is_some_and(|v| v != step.version) {
            return Err(ApiError::new(
                StatusCode::PRECONDITION_FAILED,
                "the step moved since the version in If-Match; read it again",
            ));
        }
    }
    Ok(id)
}

/// Confirms a proposal as its second approver: the action is taken in the token's name, and
/// its waiver or authorization names the proposal. Refused to the proposer, to a token issued
/// to them, after the proposal expired, or when the step moved since.
#[utoipa::path(
    post,
    path = "/api/v1/proposals/{id}/confirm",
    operation_id = "confirm_proposal",
    params(
        ("id" = String, Path, description = "Proposal id (a UUID), from the step's evidence"),
        ("If-Match" = Option<String>, Header, description = "The step's version as last read; 412 when it has moved"),
    ),
    request_body = DecideBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Confirmed and done", body = DoneBody),
        (status = 403, description = "Not an approver, or the proposer (or a token issued to them)", body = ErrorBody),
        (status = 404, description = "No such proposal (or one outside the token's prefix)", body = ErrorBody),
        (status = 409, description = "Decided already, or expired", body = ErrorBody),
        (status = 412, description = "The step moved since it was proposed", body = ErrorBody),
        (status = 422, description = "No reason", body = ErrorBody),
    )
)]
pub(crate) async fn confirm(
    client: ApiClient,
    State(pool): State<PgPool>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Json<DecideBody>, JsonRejection>,
) -> Result<Json<DoneBody>, ApiError> {
    decide(client, pool, id, headers, body, true).await
}

/// Declines a proposal as its second approver: nothing is done to the step.
#[utoipa::path(
    post,
    path = "/api/v1/proposals/{id}/decline",
    operation_id = "decline_proposal",
    params(("id" = String, Path, description = "Proposal id (a UUID), from the step's evidence")),
    request_body = DecideBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Declined", body = DoneBody),
        (status = 403, description = "Not an approver, or the proposer (or a token issued to them)", body = ErrorBody),
        (status = 404, description = "No such proposal (or one outside the token's prefix)", body = ErrorBody),
        (status = 409, description = "Decided already, or expired", body = ErrorBody),
        (status = 422, description = "No reason", body = ErrorBody),
    )
)]
pub(crate) async fn decline(
    client: ApiClient,
    State(pool): State<PgPool>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Json<DecideBody>, JsonRejection>,
) -> Result<Json<DoneBody>, ApiError> {
    decide(client, pool, id, headers, body, false).await
}

/// Confirms or declines the proposal in the path as the token, once it may.
async fn decide(
    client: ApiClient,
    pool: PgPool,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Json<DecideBody>, JsonRejection>,
    confirming: bool,
) -> Result<Json<DoneBody>, ApiError> {
    let id = proposal_of(&client, &pool, id, &headers).await?;
    let Json(body) = body?;
    let operator = Operator::token(&client.0);
    let done = if confirming {
        four_eyes::confirm(&pool, &operator, id, &body.reason).await
    } else {
        four_eyes::decline(&pool, &operator, id, &body.reason).await
    };
    done.map(|done| Json(done.into())).map_err(refusal)
}
