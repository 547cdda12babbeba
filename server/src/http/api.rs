//! The HTTP API under `/api/v1`: start workflows, read their status, apply definitions, and
//! (in `ops`) everything the console does. Clients authenticate
//! with a bearer token (`z29c token create NAME [--role R] [--creation-key-prefix P]`): a viewer
//! token only reads, and a prefixed token starts and sees only the workflows whose creation key
//! begins with its prefix. Every refusal is JSON `{"error": "…"}`.

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use engine::archive::ArchiveDir;
use engine::domain::Role;
use engine::intake::{self, NewWorkflow, StartError, Started};
use engine::store::journal::Actor;
use serde::Deserialize;
use serde_json::Value;
use sqlx::PgPool;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::client::{ApiClient, ApiError, ErrorBody};
use crate::state::AppState;

/// Request bodies larger than this are refused with 413.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// The `/api/v1` routes. Every documented handler is routed through [`documented`], so the
/// router and the OpenAPI document cannot disagree.
pub fn routes() -> Router<AppState> {
    let (router, _) = documented().split_for_parts();
    router
        .route("/api/v1/openapi.json", get(openapi))
        // Under /api, an unknown path answers JSON too, not the console's page.
        .route("/api/{*rest}", any(no_such_route))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
}

/// The API's handlers, each with its OpenAPI operation.
fn documented() -> OpenApiRouter<AppState> {
    use super::files_api as files;
    use super::ops::{adapters, audit, bulk, incidents, notes, proposals, queue, steps, workflows};
    OpenApiRouter::with_openapi(<ApiDoc as utoipa::OpenApi>::openapi())
        .routes(routes!(start, workflows::list))
        .routes(routes!(status))
        .routes(routes!(workflows::cancel))
        .routes(routes!(workflows::pause))
        .routes(routes!(workflows::pause_many))
        .routes(routes!(workflows::resume))
        .routes(routes!(notes::on_workflow, notes::list))
        .routes(routes!(notes::on_step))
        .routes(routes!(notes::on_incident))
        .routes(routes!(files::list))
        .routes(routes!(files::put))
        .routes(routes!(files::list_adapters))
        .routes(routes!(files::put_adapter))
        .routes(routes!(adapters::hold))
        .routes(routes!(adapters::resume))
        .routes(routes!(adapters::limit))
        .routes(routes!(queue::queue))
        .routes(routes!(steps::show))
        .routes(routes!(steps::act))
        .routes(routes!(proposals::confirm))
        .routes(routes!(proposals::decline))
        .routes(routes!(incidents::list))
        .routes(routes!(incidents::show))
        .routes(routes!(incidents::resolve))
        .routes(routes!(bulk::preview))
        .routes(routes!(bulk::start))
        .routes(routes!(bulk::progress))
        .routes(routes!(bulk::stop))
        .routes(routes!(audit::page))
}

/// The OpenAPI document `GET /api/v1/openapi.json` serves: every route of [`routes`].
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    static DOCUMENT: std::sync::LazyLock<utoipa::openapi::OpenApi> =
        std::sync::LazyLock::new(|| documented().into_openapi());
    DOCUMENT.clone()
}

/// The OpenAPI description of `/api/v1` beyond its operations (which [`documented`] adds): the
/// title, the shared schemas and the bearer scheme.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "Z29C API", description = "Start workflows and read their status; apply the definitions and adapters they run; and everything the recovery console does: the review queue, a step's evidence, every recovery action, incidents, bulk runs and the audit log."),
    components(schemas(
        StartBody,
        ErrorBody,
        engine::read::status::WorkflowStatus,
        super::files_api::DefinitionBody,
        super::files_api::AppliedBody,
        super::files_api::AdapterBody,
        engine::read::workflows::WorkflowPage,
        engine::read::workflows::WorkflowRow,
        super::ops::workflows::ReasonBody,
        super::ops::workflows::CancelledBody,
        super::ops::workflows::PausedBody,
        engine::store::pause::WorkflowPause,
        super::ops::notes::NoteBody,
        engine::store::note::Note,
        super::ops::queue::QueueBody,
        super::ops::steps::StepBody,
        super::ops::steps::ActionBody,
        super::ops::steps::DoneBody,
        super::ops::incidents::IncidentsBody,
        super::ops::incidents::ResolveBody,
        super::ops::bulk::PreviewBody,
        super::ops::bulk::PreviewAnswer,
        super::ops::bulk::RowRef,
        super::ops::bulk::StartBody,
        super::ops::bulk::StartedRun,
        super::ops::bulk::StopBody,
        super::ops::audit::AuditBody
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
    Json(openapi_document())
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
        (status = 403, description = "A viewer token, a creation key outside the token's prefix, or an adapter outside the token's limit", body = ErrorBody),
        (status = 409, description = "Creation key already used with another input", body = ErrorBody),
        (status = 413, description = "Body over 256 KiB", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "Cannot start: unknown definition, version or adapter, or invalid input", body = ErrorBody),
    )
)]
async fn start(
    client: ApiClient,
    State(pool): State<PgPool>,
    State(archive): State<ArchiveDir>,
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
    let started = intake::start_workflow_within(
        &pool,
        new,
        Actor::Api(&grant.name),
        grant.adapters.as_deref(),
    );
    let (code, workflow) = match started.await {
        Ok(Started::Created(w)) => (StatusCode::CREATED, w.id),
        Ok(Started::Existing(w)) => (StatusCode::OK, w.id),
        Ok(Started::Archived(t)) => (StatusCode::OK, t.id),
        Err(StartError::Sqlx(e)) => return Err(e.into()),
        Err(e @ StartError::CreationKeyConflict { .. }) => {
            return Err(ApiError::new(StatusCode::CONFLICT, e.to_string()));
        }
        Err(e @ StartError::AdapterNotAllowed { .. }) => {
            return Err(ApiError::new(StatusCode::FORBIDDEN, e.to_string()));
        }
        Err(e) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                e.to_string(),
            ));
        }
    };
    let projection = project(&pool, &archive, workflow)
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    Ok((code, Json(projection)).into_response())
}

/// The status of workflow `id`: from the hot tables, else read back from the archive
/// (docs/DESIGN.md §21), saying when it was archived.
async fn project(
    pool: &PgPool,
    archive: &ArchiveDir,
    id: Uuid,
) -> Result<Option<engine::read::status::WorkflowStatus>, ApiError> {
    if let Some(mut status) = engine::read::status::project(pool, id).await? {
        status.archive_copy_at = engine::store::archive::copy_place(pool, id)
            .await?
            .map(|noted| noted.archived_at);
        return Ok(Some(status));
    }
    match engine::archive::show(pool, archive, id).await {
        Ok(archived) => Ok(archived.map(|a| a.status())),
        Err(engine::archive::ArchiveError::Sqlx(e)) => Err(e.into()),
        Err(e) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("workflow {id} is archived, and its record cannot be read back: {e}"),
        )),
    }
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
    State(archive): State<ArchiveDir>,
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
    match project(&pool, &archive, id).await? {
        Some(projection) if client.0.covers(&projection.creation_key) => {
            Ok(Json(projection).into_response())
        }
        Some(_) | None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no workflow {id}"),
        )),
    }
}
