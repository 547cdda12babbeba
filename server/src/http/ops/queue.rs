//! `GET /api/v1/queue`: the review queue with the console's filters and counts.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use engine::domain::StepState;
use engine::read::queue::{self, QueueCounts, QueueFilter, QueueRow};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::{keyset, page_size, query_of};
use crate::http::client::{ApiClient, ApiError, ErrorBody};

/// The review queue's filters, as the console's.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct QueueParams {
    /// outcome_unknown, review_required or rejected.
    #[param(value_type = Option<String>)]
    state: Option<StepState>,
    adapter: Option<String>,
    definition: Option<String>,
    /// Only steps uncertain for longer than this many seconds.
    older_than_secs: Option<i64>,
    /// Only steps with a note (on the step or its workflow) written at or after this time
    /// (RFC 3339).
    #[param(value_type = Option<String>)]
    noted_since: Option<chrono::DateTime<chrono::Utc>>,
    /// The `next` of the previous page.
    after: Option<String>,
    /// Rows per page, 1 to 500 (default 50).
    limit: Option<i64>,
}

/// One page of the queue, and the counts the console's header shows.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct QueueBody {
    /// Oldest uncertainty first.
    #[schema(value_type = Vec<Object>)]
    rows: Vec<QueueRow>,
    /// Pass as `after` for the next page; absent on the last.
    next: Option<String>,
    /// Waiting steps by state and by adapter (over the whole queue, not the filter); absent
    /// for a token limited to a creation-key prefix, since they span every team.
    #[schema(value_type = Option<Object>)]
    counts: Option<QueueCounts>,
}

/// The steps waiting for a person, oldest uncertainty first. A prefixed token sees only its
/// own workflows' steps, and its cursor names no other.
#[utoipa::path(
    get,
    path = "/api/v1/queue",
    operation_id = "review_queue",
    params(QueueParams),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "One page of the queue", body = QueueBody),
        (status = 400, description = "An unknown parameter, a wrong type or a bad cursor", body = ErrorBody),
        (status = 401, description = "No or bad bearer token", body = ErrorBody),
        (status = 422, description = "A limit out of range", body = ErrorBody),
    )
)]
pub(crate) async fn queue(
    client: ApiClient,
    State(pool): State<PgPool>,
    params: Result<Query<QueueParams>, QueryRejection>,
) -> Result<Json<QueueBody>, ApiError> {
    let p = query_of(params)?;
    let limit = page_size(p.limit, 50, 500)?;
    let filter = QueueFilter {
        state: p.state,
        adapter: p.adapter,
        definition: p.definition,
        older_than_secs: p.older_than_secs,
        noted_since: p.noted_since,
        creation_key_prefix: client.0.creation_key_prefix.clone(),
    };
    let after = p.after.as_deref().map(keyset).transpose()?;
    let mut rows = queue::queue(&pool, &filter, after, limit + 1).await?;
    let next = engine::read::keyset::cut(&mut rows, limit, |r| (r.unknown_since, r.step_id))
        .map(engine::read::keyset::format);
    // The counts span every team's workflows: a prefixed token is not told them.
    let counts = match client.0.creation_key_prefix {
        None => Some(queue::queue_counts(&pool).await?),
        Some(_) => None,
    };
    Ok(Json(QueueBody { rows, next, counts }))
}
