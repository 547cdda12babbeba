//! Bulk recovery over the API: preview exactly the rows a filter selects, run one action over
//! the rows previewed (each judged again, under its row lock, when its turn comes), and read
//! a run's progress. The same engine functions as the console's bulk page.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use engine::domain::actions::{BULK_ACTIONS, BULK_MAX_ROWS};
use engine::domain::{OperatorAction, Role, StepState};
use engine::operators::Operator;
use engine::read::queue::QueueFilter;
use engine::recovery::bulk::{self, BulkError, NewRun, PreviewRow, Progress};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

use super::{at_least, id_in, unscoped};
use crate::http::client::{ApiClient, ApiError, ErrorBody};

/// The action a bulk request names, if it is one that runs in bulk.
fn bulk_action(name: &str) -> Result<OperatorAction, ApiError> {
    BULK_ACTIONS.into_iter().find(|a| a.name() == name).ok_or_else(|| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("`{name}` does not run in bulk: use check_destination, retry_same_key, waive or cancel"),
        )
    })
}

/// Which rows to preview, and for which action.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PreviewBody {
    /// check_destination, retry_same_key, waive or cancel.
    action: String,
    /// The queue's filters.
    #[schema(value_type = Option<String>)]
    state: Option<StepState>,
    adapter: Option<String>,
    definition: Option<String>,
    older_than_secs: Option<i64>,
}

/// The exact rows, each judged for the action under the token's role.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct PreviewAnswer {
    #[schema(value_type = Vec<Object>)]
    rows: Vec<PreviewRow>,
}

/// The rows a filter selects now (at most 500: a filter that selects more is refused, so a
/// run never acts on rows nobody saw).
#[utoipa::path(
    post,
    path = "/api/v1/bulk/preview",
    operation_id = "preview_bulk",
    request_body = PreviewBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The rows, each with the refusal it would meet", body = PreviewAnswer),
        (status = 403, description = "A viewer or prefixed token", body = ErrorBody),
        (status = 422, description = "Not a bulk action, or the filter selects over 500 rows", body = ErrorBody),
    )
)]
pub(crate) async fn preview(
    client: ApiClient,
    State(pool): State<PgPool>,
    body: Result<Json<PreviewBody>, JsonRejection>,
) -> Result<Json<PreviewAnswer>, ApiError> {
    at_least(&client, Role::Operator, "preview a bulk run")?;
    unscoped(&client, "preview a bulk run")?;
    let Json(body) = body?;
    let action = bulk_action(&body.action)?;
    let filter = QueueFilter {
        state: body.state,
        adapter: body.adapter,
        definition: body.definition,
        older_than_secs: body.older_than_secs,
        noted_since: None,
        creation_key_prefix: None,
    };
    let (rows, more) =
        bulk::preview(&pool, &filter, action, client.0.role, BULK_MAX_ROWS as i64).await?;
    if more {
        return Err(ApiError::coded(
            StatusCode::UNPROCESSABLE_ENTITY,
            "over_limit",
            format!(
                "the filter selects more than {BULK_MAX_ROWS} steps: narrow it (by state, adapter, definition or age)"
            ),
        ));
    }
    Ok(Json(PreviewAnswer { rows }))
}

/// One previewed row: a step and the version it had.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RowRef {
    step: Uuid,
    version: i64,
}

/// A run to start.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StartBody {
    action: String,
    /// Why, for every item's audit entry (required).
    reason: String,
    /// waive: the uncertainty that remains, named.
    residual_uncertainty: Option<String>,
    /// Steps per second (default 5).
    rate_per_sec: Option<i32>,
    /// The rows as previewed; an item whose step moved since is refused when its turn comes.
    rows: Vec<RowRef>,
}

/// A run started.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct StartedRun {
    id: Uuid,
}

/// Starts a run over exactly the rows given; `GET /api/v1/bulk/{id}` follows it.
#[utoipa::path(
    post,
    path = "/api/v1/bulk",
    operation_id = "start_bulk",
    request_body = StartBody,
    security(("bearer" = [])),
    responses(
        (status = 202, description = "Started", body = StartedRun),
        (status = 403, description = "A viewer or prefixed token", body = ErrorBody),
        (status = 422, description = "Not a bulk action, no reason, no rows, over 500 rows or a bad rate", body = ErrorBody),
    )
)]
pub(crate) async fn start(
    client: ApiClient,
    State(pool): State<PgPool>,
    body: Result<Json<StartBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    at_least(&client, Role::Operator, "start a bulk run")?;
    unscoped(&client, "start a bulk run")?;
    let Json(body) = body?;
    let action = bulk_action(&body.action)?;
    if body.rows.len() > BULK_MAX_ROWS {
        return Err(ApiError::coded(
            StatusCode::UNPROCESSABLE_ENTITY,
            "over_limit",
            format!(
                "a run acts on at most {BULK_MAX_ROWS} steps, not {}",
                body.rows.len()
            ),
        ));
    }
    let rows: Vec<(Uuid, i64)> = body.rows.iter().map(|r| (r.step, r.version)).collect();
    let operator = Operator::token(&client.0);
    let id = bulk::create(
        &pool,
        &NewRun {
            operator: &operator,
            action,
            reason: &body.reason,
            residual_uncertainty: body.residual_uncertainty.as_deref(),
            rate_per_sec: body.rate_per_sec.unwrap_or(5),
            rows: &rows,
        },
    )
    .await
    .map_err(|e| match e {
        BulkError::Invalid(why) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, why),
        BulkError::Sqlx(e) => e.into(),
    })?;
    bulk::spawn(pool.clone(), id);
    Ok((StatusCode::ACCEPTED, Json(StartedRun { id })).into_response())
}

/// A run's progress: every item's outcome so far.
#[utoipa::path(
    get,
    path = "/api/v1/bulk/{id}",
    operation_id = "bulk_progress",
    params(("id" = String, Path, description = "Run id (a UUID)")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The run", body = Object),
        (status = 403, description = "A prefixed token", body = ErrorBody),
        (status = 404, description = "No such run", body = ErrorBody),
    )
)]
pub(crate) async fn progress(
    client: ApiClient,
    State(pool): State<PgPool>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<Progress>, ApiError> {
    unscoped(&client, "read a bulk run")?;
    let id = id_in(id, "bulk run")?;
    bulk::progress(&pool, id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("no bulk run {id}")))
}

/// Why a run is stopped.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StopBody {
    /// Why, for the audit log and every item left undone (required).
    reason: String,
}

/// Stops a run: the items not yet performed are refused, and the stop is audited. Its author
/// or an approver may stop it.
#[utoipa::path(
    post,
    path = "/api/v1/bulk/{id}/stop",
    operation_id = "stop_bulk",
    params(("id" = String, Path, description = "Run id (a UUID)")),
    request_body = StopBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Stopped; the run as it stands", body = Object),
        (status = 403, description = "A viewer or prefixed token", body = ErrorBody),
        (status = 404, description = "No such run", body = ErrorBody),
        (status = 409, description = "The run had finished", body = ErrorBody),
        (status = 422, description = "No reason, or neither the author nor an approver", body = ErrorBody),
    )
)]
pub(crate) async fn stop(
    client: ApiClient,
    State(pool): State<PgPool>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<StopBody>, JsonRejection>,
) -> Result<Json<Progress>, ApiError> {
    at_least(&client, Role::Operator, "stop a bulk run")?;
    unscoped(&client, "stop a bulk run")?;
    let id = id_in(id, "bulk run")?;
    let Json(body) = body?;
    let missing = || ApiError::new(StatusCode::NOT_FOUND, format!("no bulk run {id}"));
    if bulk::progress(&pool, id).await?.is_none() {
        return Err(missing());
    }
    let operator = Operator::token(&client.0);
    let stopped = bulk::stop(&pool, id, &operator, &body.reason)
        .await
        .map_err(|e| match e {
            BulkError::Invalid(why) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, why),
            BulkError::Sqlx(e) => e.into(),
        })?;
    if !stopped {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("bulk run {id} had finished already"),
        ));
    }
    bulk::progress(&pool, id)
        .await?
        .map(Json)
        .ok_or_else(missing)
}
