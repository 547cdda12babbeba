//! Who is calling the API (a bearer token) and how it is told no: every refusal is JSON
//! `{"error": "…", "code": "…"}`, a sentence and a stable code a program can branch on.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sqlx::PgPool;

/// Every refusal's body.
#[derive(utoipa::ToSchema)]
#[expect(dead_code, reason = "describes the JSON that ApiError writes")]
pub(super) struct ErrorBody {
    /// What is wrong, in a sentence.
    error: String,
    /// What kind of refusal it is, stable across versions: `malformed`, `unauthenticated`,
    /// `forbidden`, `not_found`, `conflict`, `not_permitted`, `busy`, `stale`, `too_large`,
    /// `not_json`, `invalid`, `unavailable` or `internal`.
    code: String,
}

/// A refusal, always with a sentence that says what is wrong and a stable code.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    /// A refusal whose code follows from its status.
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self::coded(status, code_of(status), message)
    }

    /// A refusal with a code more precise than its status says.
    pub(super) fn coded(
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }
}

/// The code a status answers with unless a refusal names a more precise one.
fn code_of(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "malformed",
        401 => "unauthenticated",
        403 => "forbidden",
        404 => "not_found",
        409 => "conflict",
        412 => "stale",
        413 => "too_large",
        415 => "not_json",
        422 => "invalid",
        503 => "unavailable",
        _ => "internal",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({ "error": self.message, "code": self.code })),
        )
            .into_response()
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> Self {
        // A value PostgreSQL could not take (out of range, not text it stores) or a reference
        // to a row that is not there: the request's fault, said as such, never a 500.
        if let Some(code) = error.as_database_error().and_then(|e| e.code()) {
            let refused = match &*code {
                c if c.starts_with("22") => Some(
                    "a value in the request is out of range or holds a character that cannot be stored (such as NUL)",
                ),
                "23503" => Some("the request names something that does not exist"),
                _ => None,
            };
            if let Some(sentence) = refused {
                tracing::info!(%error, "a request the database refused");
                return ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, sentence);
            }
        }
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

/// An authenticated API client: its token's name, role and creation-key prefix. Any router
/// whose state holds the database asks for one: the API's, and a worker's metrics listener.
pub struct ApiClient(pub engine::store::token::Grant);

impl<S> FromRequestParts<S> for ApiClient
where
    S: Send + Sync,
    PgPool: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let unauthorized = || {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "the request carries no live token: send `Authorization: Bearer <token>` with a token from `z29c token create NAME` that has not been revoked",
            )
        };
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(unauthorized)?;
        engine::store::token::verify(&PgPool::from_ref(state), token.trim())
            .await?
            .map(ApiClient)
            .ok_or_else(unauthorized)
    }
}

impl ApiClient {
    /// Refuses, naming what was asked, when the token may not use adapter `name`
    /// (`Grant::may_use`).
    pub(super) fn may_use(&self, name: &str, what: &str) -> Result<(), ApiError> {
        match &self.0.adapters {
            Some(limit) if !self.0.may_use(name) => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "token `{}` may use only the adapters {}; to {what} `{name}` it needs a token that may use it",
                    self.0.name,
                    limit.join(", ")
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// Whatever answers a refusal under `/api/` in a body of its own (an extractor's plain-text
/// rejection, a method not allowed, a body over the limit): the same JSON every handler's
/// refusal is, its text the sentence and its code the status's.
pub(super) async fn refusals_as_json(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let api = request.uri().path().starts_with("/api/");
    let response = next.run(request).await;
    let status = response.status();
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !api || json || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 4096)
        .await
        .ok()
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("refused").to_owned());
    let mut refused = ApiError::new(status, text).into_response();
    for name in [header::ALLOW, header::RETRY_AFTER] {
        if let Some(value) = parts.headers.get(&name) {
            refused.headers_mut().insert(name, value.clone());
        }
    }
    refused
}
