//! Every answer of the payments API that is not a success, in Stripe's error shape.

use axum::response::{IntoResponse, Response};
use http::StatusCode;

use super::answer::Answer;
use super::wire::{ErrorBody, ErrorDetail, KEY_IN_USE_MESSAGE};

/// A request the payments destination did not carry out, or whose outcome it will not tell.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PaymentError {
    #[error("Invalid API Key provided: send `Authorization: Bearer <api key>`.")]
    ApiKey,
    #[error(
        "The body must be form-encoded, sent with `Content-Type: application/x-www-form-urlencoded`."
    )]
    NotForm,
    #[error("Missing required param: {0}.")]
    Missing(&'static str),
    #[error("Invalid {param}: {message}")]
    Invalid {
        param: String,
        message: &'static str,
    },
    #[error("Received unknown parameter: {0}")]
    Unknown(String),
    #[error("Your card was declined.")]
    Declined {
        decline_code: &'static str,
        /// The failed charge the decline left behind.
        charge: String,
    },
    #[error("{KEY_IN_USE_MESSAGE}")]
    KeyInUse,
    #[error("No such charge: '{id}'")]
    NoSuchCharge { id: String, param: &'static str },
    #[error("Charge {0} has already been refunded.")]
    AlreadyRefunded(String),
    #[error("Charge {0} failed, so there is nothing to refund.")]
    NotRefundable(String),
    #[error("Too many requests hit the API too quickly; nothing was done.")]
    RateLimited,
    /// A scripted rejection: of a charge as a decline, of anything else as a refusal.
    #[error("The request was rejected; nothing was done.")]
    Rejected { code: String, card: bool },
    #[error("The service is unavailable; try again later.")]
    LookupUnavailable,
    #[error("Unrecognized request URL.")]
    NoSuchEndpoint,
    /// A scripted server error after the work was done: it must look like any other.
    #[error("An unknown error occurred.")]
    AfterCommit(StatusCode),
    #[error("An unknown error occurred.")]
    Database(#[from] sqlx::Error),
}

impl PaymentError {
    fn status(&self) -> StatusCode {
        match self {
            PaymentError::ApiKey => StatusCode::UNAUTHORIZED,
            PaymentError::NotForm => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            PaymentError::Missing(_)
            | PaymentError::Invalid { .. }
            | PaymentError::Unknown(_)
            | PaymentError::KeyInUse
            | PaymentError::AlreadyRefunded(_)
            | PaymentError::NotRefundable(_)
            | PaymentError::Rejected { card: false, .. } => StatusCode::BAD_REQUEST,
            PaymentError::Declined { .. } | PaymentError::Rejected { card: true, .. } => {
                StatusCode::PAYMENT_REQUIRED
            }
            PaymentError::NoSuchCharge { .. } | PaymentError::NoSuchEndpoint => {
                StatusCode::NOT_FOUND
            }
            PaymentError::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            PaymentError::LookupUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            PaymentError::AfterCommit(status) => *status,
            PaymentError::Database(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn detail(&self) -> ErrorDetail {
        let detail = |kind: &str, code: Option<&str>| ErrorDetail {
            kind: kind.to_owned(),
            code: code.map(str::to_owned),
            decline_code: None,
            param: None,
            charge: None,
            message: self.to_string(),
        };
        let invalid = |code| detail("invalid_request_error", Some(code));
        match self {
            PaymentError::ApiKey => invalid("api_key_invalid"),
            PaymentError::NotForm => invalid("unsupported_media_type"),
            PaymentError::Missing(param) => ErrorDetail {
                param: Some((*param).to_owned()),
                ..invalid("parameter_missing")
            },
            PaymentError::Invalid { param, .. } => ErrorDetail {
                param: Some(param.clone()),
                ..invalid("parameter_invalid")
            },
            PaymentError::Unknown(param) => ErrorDetail {
                param: Some(param.clone()),
                ..invalid("parameter_unknown")
            },
            PaymentError::Declined {
                decline_code,
                charge,
            } => ErrorDetail {
                decline_code: Some((*decline_code).to_owned()),
                charge: Some(charge.clone()),
                ..detail("card_error", Some("card_declined"))
            },
            PaymentError::Rejected { code, card: true } => ErrorDetail {
                decline_code: Some(code.clone()),
                ..detail("card_error", Some("card_declined"))
            },
            PaymentError::Rejected { code, card: false } => invalid(code),
            PaymentError::KeyInUse => detail("idempotency_error", Some("idempotency_key_in_use")),
            PaymentError::NoSuchCharge { param, .. } => ErrorDetail {
                param: Some((*param).to_owned()),
                ..invalid("resource_missing")
            },
            PaymentError::AlreadyRefunded(_) => invalid("charge_already_refunded"),
            PaymentError::NotRefundable(_) => invalid("charge_not_refundable"),
            PaymentError::RateLimited => detail("rate_limit_error", Some("rate_limit")),
            PaymentError::NoSuchEndpoint => invalid("resource_missing"),
            PaymentError::LookupUnavailable
            | PaymentError::AfterCommit(_)
            | PaymentError::Database(_) => detail("api_error", None),
        }
    }

    /// The answer, as sent and as saved under an idempotency key.
    pub(crate) fn answer(&self) -> Answer {
        if let PaymentError::Database(error) = self {
            // The client learns only that something failed, never the driver's words.
            tracing::error!(%error, "payments destination database error");
        }
        Answer::json(
            self.status(),
            &ErrorBody {
                error: self.detail(),
            },
        )
    }
}

impl IntoResponse for PaymentError {
    fn into_response(self) -> Response {
        self.answer().into_response()
    }
}
