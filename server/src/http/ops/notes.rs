//! `POST /api/v1/{workflows|steps|incidents}/{id}/notes` and `GET /api/v1/workflows/{id}/notes`:
//! an operator's note on a workflow, a step or an incident (docs/DESIGN.md §20), recorded in the
//! audit log under the token's name; it changes no state.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use engine::domain::Role;
use engine::operators::Operator;
use engine::store::note::{Note, NoteOn};
use serde::Deserialize;
use sqlx::PgPool;
use uuid::Uuid;

use super::workflows::visible;
use super::{at_least, id_in, refusal};
use crate::http::client::{ApiClient, ApiError, ErrorBody};

/// A note's text.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoteBody {
    /// What the next person should know (up to 4,000 characters).
    text: String,
}

/// Adds a note to a workflow.
#[utoipa::path(
    post,
    path = "/api/v1/workflows/{id}/notes",
    operation_id = "note_workflow",
    params(("id" = String, Path, description = "Workflow id (a UUID)")),
    request_body = NoteBody,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Written", body = Note),
        (status = 403, description = "A viewer token", body = ErrorBody),
        (status = 404, description = "No such workflow (or one outside the token's prefix)", body = ErrorBody),
        (status = 422, description = "No text, or a malformed body", body = ErrorBody),
    )
)]
pub(crate) async fn on_workflow(
    client: ApiClient,
    State(pool): State<PgPool>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<NoteBody>, JsonRejection>,
) -> Result<(StatusCode, Json<Note>), ApiError> {
    let on = NoteOn::Workflow(id_in(id, "workflow")?);
    write(&client, &pool, on, body).await
}

/// Adds a note to a step: it shows in the step's timeline.
#[utoipa::path(
    post,
    path = "/api/v1/steps/{id}/notes",
    operation_id = "note_step",
    params(("id" = String, Path, description = "Step id (a UUID)")),
    request_body = NoteBody,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Written", body = Note),
        (status = 403, description = "A viewer token", body = ErrorBody),
        (status = 404, description = "No such step (or one outside the token's prefix)", body = ErrorBody),
        (status = 422, description = "No text, or a malformed body", body = ErrorBody),
    )
)]
pub(crate) async fn on_step(
    client: ApiClient,
    State(pool): State<PgPool>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<NoteBody>, JsonRejection>,
) -> Result<(StatusCode, Json<Note>), ApiError> {
    let on = NoteOn::Step(id_in(id, "step")?);
    write(&client, &pool, on, body).await
}

/// Adds a note to an integrity incident.
#[utoipa::path(
    post,
    path = "/api/v1/incidents/{id}/notes",
    operation_id = "note_incident",
    params(("id" = String, Path, description = "Incident id (a UUID)")),
    request_body = NoteBody,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Written", body = Note),
        (status = 403, description = "A viewer token", body = ErrorBody),
        (status = 404, description = "No such incident (or one outside the token's prefix)", body = ErrorBody),
        (status = 422, description = "No text, or a malformed body", body = ErrorBody),
    )
)]
pub(crate) async fn on_incident(
    client: ApiClient,
    State(pool): State<PgPool>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<NoteBody>, JsonRejection>,
) -> Result<(StatusCode, Json<Note>), ApiError> {
    let on = NoteOn::Incident(id_in(id, "incident")?);
    write(&client, &pool, on, body).await
}

/// Every note on a workflow, its steps and its incidents, oldest first.
#[utoipa::path(
    get,
    path = "/api/v1/workflows/{id}/notes",
    operation_id = "workflow_notes",
    params(("id" = String, Path, description = "Workflow id (a UUID)")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The notes", body = [Note]),
        (status = 404, description = "No such workflow (or one outside the token's prefix)", body = ErrorBody),
    )
)]
pub(crate) async fn list(
    client: ApiClient,
    State(pool): State<PgPool>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<Vec<Note>>, ApiError> {
    let id = id_in(id, "workflow")?;
    visible(&client, &pool, id).await?;
    Ok(Json(engine::store::note::of_workflow(&pool, id).await?))
}

/// Writes the note once the token may: an operator's role, and the workflow within its prefix.
async fn write(
    client: &ApiClient,
    pool: &PgPool,
    on: NoteOn,
    body: Result<Json<NoteBody>, JsonRejection>,
) -> Result<(StatusCode, Json<Note>), ApiError> {
    at_least(client, Role::Operator, "write a note")?;
    let Json(body) = body?;
    let workflow = workflow_of(pool, on).await?;
    visible(client, pool, workflow).await?;
    let note = engine::recovery::note::add_note(pool, &Operator::token(&client.0), on, &body.text)
        .await
        .map_err(refusal)?;
    Ok((StatusCode::CREATED, Json(note)))
}

/// The workflow a note on `on` belongs to, or a 404 naming what was not found.
async fn workflow_of(pool: &PgPool, on: NoteOn) -> Result<Uuid, ApiError> {
    let mut conn = pool.acquire().await?;
    match engine::store::note::place(&mut conn, on).await? {
        Some((workflow, _)) => Ok(workflow),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            match on {
                NoteOn::Workflow(id) => format!("no workflow {id}"),
                NoteOn::Step(id) => format!("no step {id}"),
                NoteOn::Incident(id) => format!("no incident {id}"),
            },
        )),
    }
}
