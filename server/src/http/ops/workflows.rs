//! `GET /api/v1/workflows` (list and search), and `POST /api/v1/workflows/{id}/cancel`,
//! `/pause` and `/resume`.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use chrono::Utc;
use engine::domain::{Role, WorkflowState};
use engine::operators::Operator;
use engine::read::workflows::{self, WorkflowPage, WorkflowQuery};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

use super::{at_least, id_in, page_size, query_of, refusal, scoped};
use crate::http::client::{ApiClient, ApiError};

/// The filters of `GET /api/v1/workflows`; every one given must hold.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListParams {
    /// pending, running, needs_review, completed or cancelled.
    #[param(value_type = Option<String>)]
    state: Option<WorkflowState>,
    /// A definition's name.
    definition: Option<String>,
    /// Workflows with a step that calls this adapter.
    adapter: Option<String>,
    /// Only workflows created more than this many seconds ago.
    older_than_secs: Option<i64>,
    /// The creation key, exactly.
    creation_key: Option<String>,
    /// A step's request key, exactly.
    request_key: Option<String>,
    /// An external reference on one of the workflow's receipts, exactly.
    external_reference: Option<String>,
    /// The `next` of the previous page.
    after: Option<Uuid>,
    /// Rows per page, 1 to 500 (default 50).
    limit: Option<i64>,
}

/// Workflows, newest first, a page at a time (keyset: pass `next` as `after`). A prefixed
/// token sees only its own creation keys.
#[utoipa::path(
    get,
    path = "/api/v1/workflows",
    operation_id = "list_workflows",
    params(ListParams),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "One page", body = WorkflowPage),
        (status = 400, description = "An unknown parameter or a value of the wrong type", body = crate::http::client::ErrorBody),
        (status = 401, description = "No or bad bearer token", body = crate::http::client::ErrorBody),
        (status = 422, description = "A limit or age out of range", body = crate::http::client::ErrorBody),
    )
)]
pub(crate) async fn list(
    client: ApiClient,
    State(pool): State<PgPool>,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<WorkflowPage>, ApiError> {
    let p = query_of(params)?;
    let created_before = match p.older_than_secs {
        None => None,
        Some(secs) if (0..=100 * 365 * 86_400).contains(&secs) => {
            Some(Utc::now() - chrono::Duration::seconds(secs))
        }
        Some(secs) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("`older_than_secs` is a number of seconds from 0 to a century, not {secs}"),
            ));
        }
    };
    let query = WorkflowQuery {
        state: p.state,
        definition: p.definition,
        adapter: p.adapter,
        created_before,
        creation_key: p.creation_key,
        request_key: p.request_key,
        external_reference: p.external_reference,
        creation_key_prefix: client.0.creation_key_prefix.clone(),
        key: None,
        after: p.after,
        limit: page_size(p.limit, 50, workflows::MAX_PAGE)?,
    };
    Ok(Json(workflows::list(&pool, &query).await?))
}

/// What a person gives for an action that needs only a reason.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReasonBody {
    /// Why, for the audit log (required).
    reason: String,
}

/// What cancelling a workflow did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct CancelledBody {
    message: String,
    /// The steps cancelled by name (each with the unstarted steps after it).
    steps: Vec<Uuid>,
}

/// Cancels every unsettled step of a workflow through the same path as the console's Cancel:
/// the contract decides for each step, and each is audited under the token's name.
#[utoipa::path(
    post,
    path = "/api/v1/workflows/{id}/cancel",
    operation_id = "cancel_workflow",
    params(("id" = String, Path, description = "Workflow id (a UUID)")),
    request_body = ReasonBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Cancelled", body = CancelledBody),
        (status = 403, description = "The token's role may not cancel", body = crate::http::client::ErrorBody),
        (status = 404, description = "No such workflow (or one outside the token's prefix)", body = crate::http::client::ErrorBody),
        (status = 409, description = "Finished already, a step in flight, or the contract forbids it", body = crate::http::client::ErrorBody),
        (status = 422, description = "No reason, or a malformed body", body = crate::http::client::ErrorBody),
    )
)]
pub(crate) async fn cancel(
    client: ApiClient,
    State(pool): State<PgPool>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<ReasonBody>, JsonRejection>,
) -> Result<Json<CancelledBody>, ApiError> {
    let id = id_in(id, "workflow")?;
    at_least(&client, Role::Approver, "cancel a workflow")?;
    let Json(body) = body?;
    if scoped(&client) {
        visible(&client, &pool, id).await?;
    }
    let done = engine::recovery::cancel::cancel_workflow(
        &pool,
        &Operator::token(&client.0),
        id,
        &body.reason,
    )
    .await
    .map_err(refusal)?;
    Ok(Json(CancelledBody {
        message: done.message,
        steps: done.steps,
    }))
}

/// What pausing or resuming a workflow did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct PausedBody {
    message: String,
    /// The pause begun, or the one resuming ended.
    pause: engine::store::pause::WorkflowPause,
    /// How many steps it held, or sent back to the queue.
    steps: usize,
}

/// Pauses a workflow: no step of it starts until it is resumed (its ready steps wait held at
/// once; calls in flight settle as they would). Audited on the workflow with the reason.
#[utoipa::path(
    post,
    path = "/api/v1/workflows/{id}/pause",
    operation_id = "pause_workflow",
    params(("id" = String, Path, description = "Workflow id (a UUID)")),
    request_body = ReasonBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Paused", body = PausedBody),
        (status = 403, description = "A viewer token", body = crate::http::client::ErrorBody),
        (status = 404, description = "No such workflow (or one outside the token's prefix)", body = crate::http::client::ErrorBody),
        (status = 409, description = "Paused already (the pause in force is named), or completed or cancelled", body = crate::http::client::ErrorBody),
        (status = 422, description = "No reason, or a malformed body", body = crate::http::client::ErrorBody),
    )
)]
pub(crate) async fn pause(
    client: ApiClient,
    State(pool): State<PgPool>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<ReasonBody>, JsonRejection>,
) -> Result<Json<PausedBody>, ApiError> {
    let (id, reason) = pausing(&client, &pool, id, body, "pause a workflow").await?;
    let done =
        engine::recovery::pause::pause_workflow(&pool, &Operator::token(&client.0), id, &reason)
            .await
            .map_err(refusal)?;
    Ok(Json(done.into()))
}

/// Resumes a paused workflow: its held steps go back to the queue (those whose adapter is held
/// stay held). Audited on the workflow with the reason.
#[utoipa::path(
    post,
    path = "/api/v1/workflows/{id}/resume",
    operation_id = "resume_workflow",
    params(("id" = String, Path, description = "Workflow id (a UUID)")),
    request_body = ReasonBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Resumed", body = PausedBody),
        (status = 403, description = "A viewer token", body = crate::http::client::ErrorBody),
        (status = 404, description = "No such workflow (or one outside the token's prefix)", body = crate::http::client::ErrorBody),
        (status = 409, description = "Not paused", body = crate::http::client::ErrorBody),
        (status = 422, description = "No reason, or a malformed body", body = crate::http::client::ErrorBody),
    )
)]
pub(crate) async fn resume(
    client: ApiClient,
    State(pool): State<PgPool>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<ReasonBody>, JsonRejection>,
) -> Result<Json<PausedBody>, ApiError> {
    let (id, reason) = pausing(&client, &pool, id, body, "resume a workflow").await?;
    let done =
        engine::recovery::pause::resume_workflow(&pool, &Operator::token(&client.0), id, &reason)
            .await
            .map_err(refusal)?;
    Ok(Json(done.into()))
}

/// The workflows a bulk pause names, and why.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PauseManyBody {
    /// Why, for the audit log of each (required).
    reason: String,
    /// The workflows to pause (1 to 1,000): those `GET /api/v1/workflows` listed for a filter.
    workflows: Vec<Uuid>,
}

/// What a bulk pause did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct PausedManyBody {
    message: String,
    /// The workflows paused now.
    paused: Vec<Uuid>,
    /// Those left as they were: paused already, completed or cancelled.
    left: usize,
    /// How many ready steps they held at once.
    steps: usize,
}

/// Pauses many workflows at once — those a filter listed — in one transaction: each that is
/// neither settled nor paused already is paused and audited as one alone would be.
#[utoipa::path(
    post,
    path = "/api/v1/workflows/pause",
    operation_id = "pause_workflows",
    request_body = PauseManyBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Paused", body = PausedManyBody),
        (status = 403, description = "A viewer token", body = crate::http::client::ErrorBody),
        (status = 404, description = "A workflow that does not exist or is outside the token's prefix", body = crate::http::client::ErrorBody),
        (status = 422, description = "No reason, no workflow or more than 1,000, or a malformed body", body = crate::http::client::ErrorBody),
    )
)]
pub(crate) async fn pause_many(
    client: ApiClient,
    State(pool): State<PgPool>,
    body: Result<Json<PauseManyBody>, JsonRejection>,
) -> Result<Json<PausedManyBody>, ApiError> {
    at_least(&client, Role::Operator, "pause workflows")?;
    let Json(body) = body?;
    if scoped(&client) {
        for &id in body
            .workflows
            .iter()
            .take(engine::recovery::pause::MAX_PAUSED_AT_ONCE)
        {
            visible(&client, &pool, id).await?;
        }
    }
    let operator = Operator::token(&client.0);
    let done =
        engine::recovery::pause::pause_workflows(&pool, &operator, &body.workflows, &body.reason)
            .await
            .map_err(refusal)?;
    Ok(Json(PausedManyBody {
        message: done.message,
        paused: done.paused,
        left: done.left,
        steps: done.steps,
    }))
}

impl From<engine::recovery::pause::Paused> for PausedBody {
    fn from(p: engine::recovery::pause::Paused) -> Self {
        PausedBody {
            message: p.message,
            pause: p.pause,
            steps: p.steps,
        }
    }
}

/// The workflow and the reason, once the token may pause or resume it.
async fn pausing(
    client: &ApiClient,
    pool: &PgPool,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<ReasonBody>, JsonRejection>,
    what: &str,
) -> Result<(Uuid, String), ApiError> {
    let id = id_in(id, "workflow")?;
    at_least(client, Role::Operator, what)?;
    let Json(body) = body?;
    // Always: an unknown workflow is a 404 that names the workflow, not the step.
    visible(client, pool, id).await?;
    Ok((id, body.reason))
}

/// Answers 404 for a workflow the token may not see, as for one that does not exist.
pub(super) async fn visible(client: &ApiClient, pool: &PgPool, id: Uuid) -> Result<(), ApiError> {
    match engine::read::status::project(pool, id).await? {
        Some(w) if client.0.covers(&w.creation_key) => Ok(()),
        Some(_) | None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no workflow {id}"),
        )),
    }
}
