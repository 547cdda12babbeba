//! `GET /api/v1/incidents`, `GET /api/v1/incidents/{id}` and
//! `POST /api/v1/incidents/{id}/resolve`: duplicate-effect incidents and their resolution.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use engine::domain::Disposition;
use engine::operators::Operator;
use engine::read::incident::IncidentDetail;
use engine::read::queue::{IncidentRow, open_incident_page};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

use super::{id_in, keyset, page_size, query_of, refusal, scoped};
use crate::http::client::{ApiClient, ApiError, ErrorBody};

/// Which page of the open incidents.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct IncidentsParams {
    /// The `next` of the previous page.
    after: Option<String>,
    /// Incidents per page, 1 to 500 (default 500).
    limit: Option<i64>,
}

/// Open incidents.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct IncidentsBody {
    /// Oldest first.
    #[schema(value_type = Vec<Object>)]
    incidents: Vec<IncidentRow>,
    /// Pass as `after` for the next page; absent on the last.
    next: Option<String>,
    /// How many are open in all (of the token's own workflows, for a prefixed token).
    open: i64,
}

/// The open integrity incidents, oldest first, a page at a time, with the references each
/// concerns.
#[utoipa::path(
    get,
    path = "/api/v1/incidents",
    operation_id = "list_incidents",
    params(IncidentsParams),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "One page of the open incidents", body = IncidentsBody),
        (status = 400, description = "An unknown parameter or a bad cursor", body = ErrorBody),
        (status = 401, description = "No or bad bearer token", body = ErrorBody),
        (status = 422, description = "A limit out of range", body = ErrorBody),
    )
)]
pub(crate) async fn list(
    client: ApiClient,
    State(pool): State<PgPool>,
    params: Result<Query<IncidentsParams>, QueryRejection>,
) -> Result<Json<IncidentsBody>, ApiError> {
    let p = query_of(params)?;
    let limit = page_size(p.limit, 500, 500)?;
    let after = p.after.as_deref().map(keyset).transpose()?;
    // Narrowed to the token's prefix before the limit, so a prefixed token pages its own.
    let prefix = client.0.creation_key_prefix.as_deref();
    let page = open_incident_page(&pool, limit, prefix, after).await?;
    Ok(Json(IncidentsBody {
        incidents: page.rows,
        next: page.next.map(engine::read::keyset::format),
        open: page.open,
    }))
}

/// One incident: each reference with its evidence, the resolution if any, and withdrawals.
#[utoipa::path(
    get,
    path = "/api/v1/incidents/{id}",
    operation_id = "show_incident",
    params(("id" = String, Path, description = "Incident id (a UUID)")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The incident", body = Object),
        (status = 400, description = "Not a UUID", body = ErrorBody),
        (status = 401, description = "No or bad bearer token", body = ErrorBody),
        (status = 404, description = "No such incident (or one outside the token's prefix)", body = ErrorBody),
    )
)]
pub(crate) async fn show(
    client: ApiClient,
    State(pool): State<PgPool>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<IncidentDetail>, ApiError> {
    let id = id_in(id, "incident")?;
    visible(&client, &pool, id).await.map(Json)
}

async fn visible(client: &ApiClient, pool: &PgPool, id: Uuid) -> Result<IncidentDetail, ApiError> {
    match engine::read::incident::incident(pool, id).await? {
        Some(i) if client.0.covers(&i.creation_key) => Ok(i),
        Some(_) | None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no incident {id}"),
        )),
    }
}

/// How to resolve an incident.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResolveBody {
    /// The external reference that stands (one of the incident's).
    canonical: String,
    /// `withdraw` the others (when the adapter can), or `accept_unresolved`.
    disposition: String,
    /// Why, for the audit log (required).
    reason: String,
}

/// Resolves an open duplicate-effect incident, as the console's incident page does.
#[utoipa::path(
    post,
    path = "/api/v1/incidents/{id}/resolve",
    operation_id = "resolve_incident",
    params(("id" = String, Path, description = "Incident id (a UUID)")),
    request_body = ResolveBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Resolved", body = super::steps::DoneBody),
        (status = 403, description = "The token's role may not resolve incidents", body = ErrorBody),
        (status = 404, description = "No such incident", body = ErrorBody),
        (status = 409, description = "Resolved already, or the disposition is not possible", body = ErrorBody),
        (status = 422, description = "No reason, an unknown disposition or a canonical reference not in the incident", body = ErrorBody),
    )
)]
pub(crate) async fn resolve(
    client: ApiClient,
    State(pool): State<PgPool>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<ResolveBody>, JsonRejection>,
) -> Result<Json<super::steps::DoneBody>, ApiError> {
    let id = id_in(id, "incident")?;
    let Json(body) = body?;
    let disposition = match body.disposition.as_str() {
        "withdraw" => Disposition::Withdraw,
        "accept_unresolved" => Disposition::AcceptUnresolved,
        other => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("`{other}` is not a disposition: use withdraw or accept_unresolved"),
            ));
        }
    };
    if scoped(&client) {
        visible(&client, &pool, id).await?;
    }
    let done = engine::recovery::incident::resolve_incident(
        &pool,
        &Operator::token(&client.0),
        id,
        &body.canonical,
        disposition,
        &body.reason,
    )
    .await
    .map_err(refusal)?;
    Ok(Json(super::steps::DoneBody::from(done)))
}
