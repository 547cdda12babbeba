//! `/api/v1/adapters/{name}/hold`, `/resume` and `/limits`: an approver stops new requests to a
//! provider during its outage and lets them go again, or limits what reaches it
//! (docs/DESIGN.md §20), as `z29c hold`, `z29c resume` and `z29c limit` do.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use engine::domain::Role;
use engine::recovery::hold::{self, Resumed};
use engine::store::hold::AdapterHold;
use engine::store::journal::Actor;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::{at_least, refusal, unscoped};
use crate::http::client::{ApiClient, ApiError, ErrorBody};

/// Why sending to an adapter is held.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct HoldBody {
    /// Why, for the audit log and every operator who sees a held step (required).
    reason: String,
    /// Hold its lookups too (the default); `false` lets recovery keep asking the provider.
    #[serde(default = "yes")]
    holds_lookups: bool,
}

fn yes() -> bool {
    true
}

/// Why sending resumes, and how fast.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResumeBody {
    /// Why, for the audit log (required).
    reason: String,
    /// Release the held steps this many a second, oldest first; all at once when absent.
    per_second: Option<f64>,
}

/// An override of an adapter's limits; neither value clears the override.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitBody {
    /// Why, for the audit log (required).
    reason: String,
    /// New requests a second, at most; the file's value when absent.
    requests_per_second: Option<f64>,
    /// Calls sent and not yet answered, at most; the file's value when absent.
    in_flight: Option<u32>,
}

/// The override in force after the change.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct LimitView {
    adapter: String,
    /// `null` once cleared: the file's limits apply.
    #[schema(value_type = Option<Object>)]
    r#override: Option<engine::store::pace::LimitOverride>,
}

/// A hold as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct HoldView {
    adapter: String,
    held_by: String,
    /// RFC 3339.
    held_at: String,
    reason: String,
    holds_lookups: bool,
    /// For a hold the adapter's breaker took: the attempts that tripped it (`step`,
    /// `observed_at`, `observed`, `status`), newest first.
    #[schema(value_type = Option<Vec<Object>>)]
    tripped_by: Option<serde_json::Value>,
}

impl From<AdapterHold> for HoldView {
    fn from(h: AdapterHold) -> Self {
        Self {
            adapter: h.adapter,
            held_by: h.held_by,
            held_at: h.held_at.to_rfc3339(),
            reason: h.reason,
            holds_lookups: h.holds_lookups,
            tripped_by: h.tripped_by,
        }
    }
}

/// What resuming did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ResumedView {
    /// The hold it ended.
    ended: HoldView,
    /// How many held steps went back to the queue.
    released: usize,
}

/// The adapter named in the path, once the token may hold or resume it.
fn admitted(
    client: &ApiClient,
    name: Result<Path<String>, PathRejection>,
    what: &str,
) -> Result<String, ApiError> {
    at_least(client, Role::Approver, what)?;
    unscoped(client, what)?;
    let Path(name) = name.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    client.may_use(&name, what)?;
    Ok(name)
}

/// Holds an adapter: from the next claim on, no worker process sends it a new request (claimed
/// steps wait `held`, unsent and uncounted), nor a lookup unless `holds_lookups` is false;
/// calls in flight settle as they would. Audited with the reason.
#[utoipa::path(
    post,
    path = "/api/v1/adapters/{name}/hold",
    operation_id = "hold_adapter",
    params(("name" = String, Path, description = "The adapter's name")),
    request_body = HoldBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Held", body = HoldView),
        (status = 403, description = "Not an approver token, a prefixed token, or one limited to other adapters", body = ErrorBody),
        (status = 409, description = "Held already: the hold in force is named", body = ErrorBody),
        (status = 422, description = "No reason, or no such adapter", body = ErrorBody),
    )
)]
pub(crate) async fn hold(
    client: ApiClient,
    State(pool): State<PgPool>,
    name: Result<Path<String>, PathRejection>,
    body: Result<Json<HoldBody>, JsonRejection>,
) -> Result<Json<HoldView>, ApiError> {
    let name = admitted(&client, name, "hold an adapter")?;
    let Json(body) = body?;
    let by = (Actor::Api(&client.0.name), client.0.role);
    hold::hold_adapter(&pool, by, &name, &body.reason, body.holds_lookups)
        .await
        .map(|h| Json(h.into()))
        .map_err(refusal)
}

/// Resumes a held adapter: its held steps go back to the queue, oldest first, all at once or
/// `per_second` a second. Audited with the reason.
#[utoipa::path(
    post,
    path = "/api/v1/adapters/{name}/resume",
    operation_id = "resume_adapter",
    params(("name" = String, Path, description = "The adapter's name")),
    request_body = ResumeBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Resumed", body = ResumedView),
        (status = 403, description = "Not an approver token, a prefixed token, or one limited to other adapters", body = ErrorBody),
        (status = 409, description = "Not held", body = ErrorBody),
        (status = 422, description = "No reason, a ramp that is not above zero, or no such adapter", body = ErrorBody),
    )
)]
pub(crate) async fn resume(
    client: ApiClient,
    State(pool): State<PgPool>,
    name: Result<Path<String>, PathRejection>,
    body: Result<Json<ResumeBody>, JsonRejection>,
) -> Result<Json<ResumedView>, ApiError> {
    let name = admitted(&client, name, "resume an adapter")?;
    let Json(body) = body?;
    let by = (Actor::Api(&client.0.name), client.0.role);
    let Resumed { hold, released } =
        hold::resume_adapter(&pool, by, &name, &body.reason, body.per_second)
            .await
            .map_err(refusal)?;
    Ok(Json(ResumedView {
        ended: hold.into(),
        released,
    }))
}

/// Overrides an adapter's outbound limits for the deployment, across every worker process; a
/// body naming neither value clears the override, and the file's limits apply again. Audited
/// with the reason.
#[utoipa::path(
    put,
    path = "/api/v1/adapters/{name}/limits",
    operation_id = "limit_adapter",
    params(("name" = String, Path, description = "The adapter's name")),
    request_body = LimitBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The override in force now", body = LimitView),
        (status = 403, description = "Not an approver token, a prefixed token, or one limited to other adapters", body = ErrorBody),
        (status = 422, description = "No reason, a limit out of bounds, or no such adapter", body = ErrorBody),
    )
)]
pub(crate) async fn limit(
    client: ApiClient,
    State(pool): State<PgPool>,
    name: Result<Path<String>, PathRejection>,
    body: Result<Json<LimitBody>, JsonRejection>,
) -> Result<Json<LimitView>, ApiError> {
    let name = admitted(&client, name, "limit an adapter")?;
    let Json(body) = body?;
    let by = (Actor::Api(&client.0.name), client.0.role);
    let limits = engine::domain::Limits {
        requests_per_second: body.requests_per_second,
        in_flight: body.in_flight,
    };
    let now = engine::recovery::limit::limit_adapter(&pool, by, &name, limits, &body.reason, None)
        .await
        .map_err(refusal)?;
    Ok(Json(LimitView {
        adapter: name,
        r#override: now,
    }))
}
