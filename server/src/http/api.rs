//! The HTTP API under `/api/v1`: start workflows, read their status, apply definitions. Clients authenticate
//! with a bearer token (`z29c token create NAME [--role R] [--creation-key-prefix P]`): a viewer
//! token only reads, and a prefixed token starts and sees only the workflows whose creation key
//! begins with its prefix. Every refusal is JSON `{"error": "…"}`.

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use engine::domain::Role;
use engine::intake::{self, NewWorkflow, StartError, Started};
use engine::store::journal::Actor;
use serde::Deserialize;
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

use super::client::{ApiClient, ApiError, ErrorBody};
use crate::state::AppState;

/// Request bodies larger than this are refused with 413.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// The `/api/v1` routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/workflows", post(start))
        .route("/api/v1/workflows/{id}", get(status))
        .route("/api/v1/definitions", get(super::files_api::list))
        .route(
            "/api/v1/definitions/{name}/{version}",
            axum::routing::put(super::files_api::put),
        )
        .route("/api/v1/adapters", get(super::files_api::list_adapters))
        .route(
            "/api/v1/adapters/{name}",
            axum::routing::put(super::files_api::put_adapter),
        )
        .route("/api/v1/openapi.json", get(openapi))
        // Under /api, an unknown path answers JSON too, not the console's page.
        .route("/api/{*rest}", any(no_such_route))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
}

/// The OpenAPI description of `/api/v1`, generated from the handlers below.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "Z29C API", description = "Start workflows, read their status, and apply the definitions and adapters they run."),
    paths(
        start,
        status,
        super::files_api::list,
        super::files_api::put,
        super::files_api::list_adapters,
        super::files_api::put_adapter
    ),
    components(schemas(
        StartBody,
        ErrorBody,
        engine::read::status::WorkflowStatus,
        super::files_api::DefinitionBody,
        super::files_api::AppliedBody,
        super::files_api::AdapterBody
    )),
    modifiers(&BearerAuth)
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

async fn no_such_route() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no such API route: the routes are listed in /api/v1/openapi.json",
    )
}

async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(<ApiDoc as utoipa::OpenApi>::openapi())
}

/// `POST /api/v1/workflows`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct StartBody {
    /// Client-supplied; the same key with the same input returns the existing workflow.
    creation_key: String,
    /// The name of an applied definition (`GET /api/v1/definitions` lists them).
    definition: String,
    /// The definition version; the newest when absent.
    #[serde(default)]
    version: Option<i32>,
    /// The input, checked against the definition's input schema (a 422 names the field).
    input: Value,
}

/// Records the intent, its steps and a `workflow.started` event in one transaction.
#[utoipa::path(
    post,
    path = "/api/v1/workflows",
    request_body = StartBody,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Started", body = engine::read::status::WorkflowStatus),
        (status = 200, description = "Same creation key and input: the existing workflow", body = engine::read::status::WorkflowStatus),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 401, description = "No, unknown or revoked bearer token", body = ErrorBody),
        (status = 403, description = "A viewer token, or a creation key outside the token's prefix", body = ErrorBody),
        (status = 409, description = "Creation key already used with another input", body = ErrorBody),
        (status = 413, description = "Body over 256 KiB", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "Cannot start: unknown definition, version or adapter, or invalid input", body = ErrorBody),
    )
)]
async fn start(
    client: ApiClient,
    State(pool): State<PgPool>,
    body: Result<Json<StartBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let grant = &client.0;
    if grant.role < Role::Operator {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "token `{}` is a viewer token: it may read workflow status but not start workflows",
                grant.name
            ),
        ));
    }
    let Json(body) = body?;
    if !grant.covers(&body.creation_key) {
        // Refused before intake looks the key up, so the answer tells nothing about the key.
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "token `{}` may start only workflows whose creation key starts with `{}`",
                grant.name,
                grant.creation_key_prefix.as_deref().unwrap_or_default()
            ),
        ));
    }
    let new = NewWorkflow {
        creation_key: body.creation_key,
        definition: body.definition,
        version: body.version,
        input: body.input,
    };
    let (code, workflow) =
        match intake::start_workflow(&pool, new, Actor::Api(&client.0.name)).await {
            Ok(Started::Created(w)) => (StatusCode::CREATED, w),
            Ok(Started::Existing(w)) => (StatusCode::OK, w),
            Err(StartError::Sqlx(e)) => return Err(e.into()),
            Err(e @ StartError::CreationKeyConflict { .. }) => {
                return Err(ApiError::new(StatusCode::CONFLICT, e.to_string()));
            }
            Err(e) => {
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    e.to_string(),
                ));
            }
        };
    let projection = engine::read::status::project(&pool, workflow.id)
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    Ok((code, Json(projection)).into_response())
}

/// The status projection of one workflow.
#[utoipa::path(
    get,
    path = "/api/v1/workflows/{id}",
    params(("id" = String, Path, description = "Workflow id (a UUID)")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The status projection", body = engine::read::status::WorkflowStatus),
        (status = 400, description = "Not a UUID", body = ErrorBody),
        (status = 401, description = "No or bad bearer token", body = ErrorBody),
        (status = 404, description = "No such workflow, or one outside the token's creation-key prefix", body = ErrorBody),
    )
)]
async fn status(
    client: ApiClient,
    State(pool): State<PgPool>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path(id) = id.map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "the workflow id in the path is not valid UTF-8",
        )
    })?;
    let id = Uuid::parse_str(&id).map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("`{id}` is not a workflow id (a UUID)"),
        )
    })?;
    // Another prefix's workflow answers as a missing one: the token cannot probe for it.
    match engine::read::status::project(&pool, id).await? {
        Some(projection) if client.0.covers(&projection.creation_key) => {
            Ok(Json(projection).into_response())
        }
        Some(_) | None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no workflow {id}"),
        )),
    }
}
