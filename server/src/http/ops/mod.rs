//! The operations API: everything the console does, for programs. Workflows listed, searched
//! and cancelled; the review queue; a step's evidence and every recovery action; incidents;
//! bulk runs; the audit log. Each action goes through the same engine function as the
//! console's form, so the role, the contract and the step's version decide exactly as they do
//! there, and the audit log names the token (docs/DESIGN.md §17).

pub(super) mod adapters;
pub(super) mod audit;
pub(super) mod bulk;
pub(super) mod incidents;
pub(super) mod notes;
pub(super) mod proposals;
pub(super) mod queue;
pub(super) mod steps;
pub(super) mod workflows;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use engine::domain::Role;
use engine::recovery::ActionError;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use super::client::{ApiClient, ApiError};

/// An action's refusal as the API answers it: the engine's sentence, with a status and a code.
pub(super) fn refusal(error: ActionError) -> ApiError {
    let message = error.to_string();
    match error {
        ActionError::NotFound => ApiError::new(StatusCode::NOT_FOUND, message),
        ActionError::Forbidden(_) => ApiError::new(StatusCode::FORBIDDEN, message),
        ActionError::NotPermitted(_) => {
            ApiError::coded(StatusCode::CONFLICT, "not_permitted", message)
        }
        ActionError::Stale(_) => ApiError::new(StatusCode::PRECONDITION_FAILED, message),
        ActionError::Conflict(_) => ApiError::coded(StatusCode::CONFLICT, "busy", message),
        ActionError::Invalid(_) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message),
        ActionError::Destination => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message),
        ActionError::Sqlx(e) => e.into(),
    }
}

/// The UUID in the path, or a 400 that names what it should have been.
pub(super) fn id_in(
    path: Result<Path<String>, PathRejection>,
    what: &str,
) -> Result<Uuid, ApiError> {
    let Path(text) = path.map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("the {what} id in the path is not valid UTF-8"),
        )
    })?;
    Uuid::parse_str(&text).map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("`{text}` is not a {what} id (a UUID)"),
        )
    })
}

/// The query string as `T`, or a 400 with serde's sentence (an unknown parameter, a wrong type).
pub(super) fn query_of<T: DeserializeOwned>(
    query: Result<Query<T>, QueryRejection>,
) -> Result<T, ApiError> {
    query
        .map(|Query(q)| q)
        .map_err(|rejection| ApiError::new(StatusCode::BAD_REQUEST, rejection.body_text()))
}

/// Refuses a token whose role is below `role` for `what` (`"act on steps"`).
pub(super) fn at_least(client: &ApiClient, role: Role, what: &str) -> Result<(), ApiError> {
    let grant = &client.0;
    if grant.role >= role {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        format!(
            "token `{}` carries the {} role; to {what} it needs the {} role",
            grant.name,
            grant.role.as_str(),
            role.as_str()
        ),
    ))
}

/// A page size: `limit` when given (1 to `max`), else `default`.
pub(super) fn page_size(limit: Option<i64>, default: i64, max: i64) -> Result<i64, ApiError> {
    match limit {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("`limit` is 1 to {max}, not {n}"),
        )),
    }
}

/// The keyset position a page's `next` names: `<RFC 3339 time>|<id>`.
pub(super) fn keyset(text: &str) -> Result<engine::read::keyset::Position, ApiError> {
    engine::read::keyset::parse(text).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("`{text}` is not a page cursor: pass the `next` of a previous page"),
        )
    })
}

/// Whether the token is limited to a creation-key prefix. Only then must an action first read
/// what it acts on to check the key: for any other token the engine's own row lock finds a
/// missing row (404) without a second read.
pub(super) fn scoped(client: &ApiClient) -> bool {
    client.0.creation_key_prefix.is_some()
}

/// Refuses a token limited to a creation-key prefix for what spans every workflow.
pub(super) fn unscoped(client: &ApiClient, what: &str) -> Result<(), ApiError> {
    match &client.0.creation_key_prefix {
        None => Ok(()),
        Some(prefix) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "token `{}` sees only creation keys starting with `{prefix}`; to {what} it needs a token without a prefix",
                client.0.name
            ),
        )),
    }
}
