//! Every answer that is not a success, and the HTTP status and body each one gets.

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::faults::FaultPlanError;
use crate::protocol::{Problem, code};

/// A request the destination did not carry out as asked, or whose outcome it will not tell.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    #[error("the body is not a valid request: {0}")]
    MalformedJson(#[from] serde_json::Error),
    #[error("{0}")]
    Malformed(String),
    #[error("the body must be JSON, sent with `Content-Type: application/json`")]
    NotJson,
    #[error(
        "this endpoint is for tests only: send `Authorization: Bearer <token>` with the control token the destination was started with"
    )]
    ControlTokenRequired,
    #[error("this destination deduplicates deliveries by key: send an Idempotency-Key header")]
    MissingIdempotencyKey,
    #[error("idempotency key {key:?} was first used with digest {first_digest}")]
    DeliveryKeyConflict { key: String, first_digest: String },
    #[error("idempotency key {key:?} was first used to withdraw {first_withdrawn}")]
    WithdrawalKeyConflict {
        key: String,
        first_withdrawn: String,
    },
    #[error("the destination is unavailable; nothing was committed")]
    Refused,
    #[error("the destination rejected the request; nothing was committed")]
    Rejected { code: String, retryable: bool },
    #[error("no delivery {0} at this destination")]
    UnknownDelivery(String),
    #[error("this destination offers no lookup by client reference")]
    LookupNotSupported,
    #[error("the destination cannot obey this fault plan: {0}")]
    InvalidFaultPlan(#[from] FaultPlanError),
    #[error("no such endpoint")]
    NotFound,
    /// A scripted server error after the work was done: it must look like any other.
    #[error("internal error")]
    AfterAccept(StatusCode),
    #[error("internal error")]
    Database(#[from] sqlx::Error),
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::Malformed(rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::Malformed(rejection.body_text())
    }
}

impl ApiError {
    fn status(&self) -> StatusCode {
        match self {
            ApiError::MalformedJson(_)
            | ApiError::Malformed(_)
            | ApiError::MissingIdempotencyKey
            | ApiError::InvalidFaultPlan(_) => StatusCode::BAD_REQUEST,
            ApiError::NotJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::ControlTokenRequired => StatusCode::UNAUTHORIZED,
            ApiError::DeliveryKeyConflict { .. }
            | ApiError::WithdrawalKeyConflict { .. }
            | ApiError::Rejected { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Refused => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::UnknownDelivery(_) | ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::LookupNotSupported => StatusCode::NOT_IMPLEMENTED,
            ApiError::AfterAccept(status) => *status,
            ApiError::Database(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &str {
        match self {
            ApiError::MalformedJson(_) | ApiError::Malformed(_) => code::MALFORMED_REQUEST,
            ApiError::NotJson => code::NOT_JSON,
            ApiError::ControlTokenRequired => code::CONTROL_TOKEN_REQUIRED,
            ApiError::MissingIdempotencyKey => code::MISSING_IDEMPOTENCY_KEY,
            ApiError::DeliveryKeyConflict { .. } | ApiError::WithdrawalKeyConflict { .. } => {
                code::IDEMPOTENCY_KEY_CONFLICT
            }
            ApiError::Refused => code::UNAVAILABLE,
            ApiError::Rejected { code, .. } => code,
            ApiError::UnknownDelivery(_) => code::UNKNOWN_DELIVERY,
            ApiError::LookupNotSupported => code::LOOKUP_NOT_SUPPORTED,
            ApiError::InvalidFaultPlan(_) => code::INVALID_FAULT_PLAN,
            ApiError::NotFound => code::NOT_FOUND,
            ApiError::AfterAccept(_) | ApiError::Database(_) => code::INTERNAL_ERROR,
        }
    }

    /// The promise that nothing was committed, where the answer makes it.
    fn promise(&self) -> Option<NothingCommitted> {
        let retryable = |retryable| Some(NothingCommitted { retryable });
        match self {
            ApiError::MalformedJson(_)
            | ApiError::Malformed(_)
            | ApiError::NotJson
            | ApiError::MissingIdempotencyKey
            | ApiError::DeliveryKeyConflict { .. }
            | ApiError::WithdrawalKeyConflict { .. }
            | ApiError::UnknownDelivery(_) => retryable(false),
            ApiError::Refused => retryable(true),
            ApiError::Rejected {
                retryable: again, ..
            } => retryable(*again),
            ApiError::LookupNotSupported
            | ApiError::ControlTokenRequired
            | ApiError::InvalidFaultPlan(_)
            | ApiError::NotFound
            | ApiError::AfterAccept(_)
            | ApiError::Database(_) => None,
        }
    }
}

/// An answer's promise that the request took no effect.
#[derive(Clone, Copy)]
struct NothingCommitted {
    /// Whether the same request may succeed later.
    retryable: bool,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Database(error) = &self {
            // The client learns only that something failed, never the driver's words.
            tracing::error!(%error, "destination database error");
        }
        let promise = self.promise();
        let problem = Problem {
            code: self.code().to_owned(),
            message: self.to_string(),
            retryable: promise.map(|promise| promise.retryable),
            accepted: promise.map(|_| false),
        };
        (self.status(), Json(problem)).into_response()
    }
}
