//! `GET /api/v1/audit`: the audit log, newest first.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use engine::domain::Role;
use engine::store::journal::{self, AuditRow};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::{at_least, page_size, query_of};
use crate::http::client::{ApiClient, ApiError, ErrorBody};

/// Which entries.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct AuditParams {
    /// An operator's username or a token's name, exactly.
    actor: Option<String>,
    /// An action's name (`retry_same_key`, `sign_in`, …).
    action: Option<String>,
    /// The `next` of the previous page.
    before: Option<i64>,
    /// Entries per page, 1 to 500 (default 100).
    limit: Option<i64>,
}

/// One page of the audit log.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct AuditBody {
    #[schema(value_type = Vec<Object>)]
    entries: Vec<AuditRow>,
    /// Pass as `before` for the next page; absent on the last.
    next: Option<i64>,
}

/// The audit log, newest first. Unscoped by creation key, so a prefixed token may not read it.
#[utoipa::path(
    get,
    path = "/api/v1/audit",
    operation_id = "audit_log",
    params(AuditParams),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "One page", body = AuditBody),
        (status = 400, description = "An unknown parameter or a wrong type", body = ErrorBody),
        (status = 401, description = "No or bad bearer token", body = ErrorBody),
        (status = 403, description = "A prefixed token", body = ErrorBody),
    )
)]
pub(crate) async fn page(
    client: ApiClient,
    State(pool): State<PgPool>,
    params: Result<Query<AuditParams>, QueryRejection>,
) -> Result<Json<AuditBody>, ApiError> {
    at_least(&client, Role::Viewer, "read the audit log")?;
    super::unscoped(&client, "read the audit log")?;
    let p = query_of(params)?;
    let limit = page_size(p.limit, 100, 500)?;
    let mut conn = pool.acquire().await?;
    let mut entries = journal::page(
        &mut conn,
        p.actor.as_deref(),
        p.action.as_deref(),
        p.before,
        limit + 1,
    )
    .await?;
    let next = engine::read::keyset::cut(&mut entries, limit, |e| e.id);
    Ok(Json(AuditBody { entries, next }))
}
