//! The HTTP API under `/api/v1`: start workflows and read their status. Clients authenticate
//! with a bearer token (`z29c token create NAME`). Every refusal is JSON `{"error": "…"}`.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use engine::intake::{self, NewWorkflow, StartError, Started};
use engine::store::journal::Actor;
use serde::Deserialize;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::http::AppState;

/// Request bodies larger than this are refused with 413.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// The `/api/v1` routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/workflows", post(start))
        .route("/api/v1/workflows/{id}", get(status))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
}

/// A refusal, always with a sentence that says what is wrong.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "error": self.message }))).into_response()
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> Self {
        tracing::error!(%error, "database error in the API");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the server could not complete the request; the details are in its log",
        )
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let status = match rejection {
            JsonRejection::MissingJsonContentType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            JsonRejection::BytesRejection(_) => StatusCode::PAYLOAD_TOO_LARGE,
            JsonRejection::JsonSyntaxError(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        ApiError::new(status, rejection.body_text())
    }
}

/// An authenticated API client, by token name.
pub struct ApiClient(pub String);

impl FromRequestParts<AppState> for ApiClient {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let unauthorized = || {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "send `Authorization: Bearer <token>`; create a token with `z29c token create NAME`",
            )
        };
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(unauthorized)?;
        engine::store::token::verify(&state.pool, token.trim())
            .await?
            .map(ApiClient)
            .ok_or_else(unauthorized)
    }
}

/// `POST /api/v1/workflows`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartBody {
    creation_key: String,
    definition: String,
    #[serde(default)]
    version: Option<i32>,
    input: Value,
}

async fn start(
    client: ApiClient,
    State(pool): State<PgPool>,
    body: Result<Json<StartBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body?;
    let new = NewWorkflow {
        creation_key: body.creation_key,
        definition: body.definition,
        version: body.version,
        input: body.input,
    };
    let (code, workflow) = match intake::start_workflow(&pool, new, Actor::Api(&client.0)).await {
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
    let projection = engine::status::project(&pool, workflow.id)
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    Ok((code, Json(projection)).into_response())
}

/// `GET /api/v1/workflows/{id}`.
async fn status(
    _client: ApiClient,
    State(pool): State<PgPool>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = Uuid::parse_str(&id).map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("`{id}` is not a workflow id (a UUID)"),
        )
    })?;
    match engine::status::project(&pool, id).await? {
        Some(projection) => Ok(Json(projection).into_response()),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no workflow {id}"),
        )),
    }
}
