//! The HTTP endpoints of a destination: wire formats in, wire formats out.

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::config::Api;
use crate::delivery::{self, Creation, WithdrawalOutcome};
use crate::disrupt::FaultWords;
use crate::error::ApiError;
use crate::faults::{FaultPlan, FaultReport, Operation, Request};
use crate::ledger::{Effect, Ledger};
use crate::protocol::{
    Accepted, DeliveryRequest, Description, IDEMPOTENCY_KEY_HEADER, LookupAnswer, SandboxAnswer,
    Supports, WITHDRAWAL_LIMITS, Withdrawn, is_digest, reference_problem,
};
use crate::script::Faults;
use crate::state::AppState;
use crate::store::{Delivery, Withdrawal};

/// The destination's endpoints: its API's (`PROTOCOL.md`, `PAYMENTS.md`), and the test-only
/// ones, behind the control token.
pub(crate) fn routes(state: AppState) -> Router {
    let service = match state.config.api {
        Api::Protocol => protocol_routes(),
        Api::Payments => crate::payments::routes(&state),
        Api::Webhook => crate::webhook::routes(),
    };
    service.merge(test_only(&state)).with_state(state)
}

/// The test-only endpoints, the same for every API.
fn test_only(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/ledger", get(ledger))
        .route(
            "/control/faults",
            get(show_faults).put(set_faults).delete(clear_faults),
        )
        .route("/control/{*rest}", any(|| async { ApiError::NotFound }))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            require_control_token,
        ))
}

/// The destination protocol's endpoints, open to any client.
fn protocol_routes() -> Router<AppState> {
    Router::new()
        .route("/", get(describe))
        .route("/deliveries", post(deliver))
        .route("/deliveries/by-reference/{client_reference}", get(look_up))
        .route(
            "/deliveries/{external_reference}/withdrawal",
            post(withdraw),
        )
        .fallback(|| async { ApiError::NotFound })
}

/// Lets a request through to a test-only endpoint only with `Authorization: Bearer <token>`.
async fn require_control_token(
    State(app): State<AppState>,
    request: axum::extract::Request,
    next: Next,
) -> Response {
    let presented = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match presented {
        Some(token) if app.config.control_token.admits(token.trim()) => next.run(request).await,
        _ => ApiError::ControlTokenRequired.into_response(),
    }
}

async fn describe(State(app): State<AppState>) -> Json<Description> {
    let kind = app.config.kind;
    Json(Description {
        kind,
        visibility_window_ms: app.config.visibility_window_ms(),
        supports: Supports {
            idempotency_key: kind.accepts_idempotency_key(),
            lookup: kind.supports_lookup(),
            withdrawal: true,
        },
    })
}

async fn deliver(
    State(app): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: DeliveryRequest = parse(&headers, &body)?;
    if let Some(problem) = request.problem() {
        return Err(ApiError::Malformed(problem));
    }
    let key = idempotency_key(&headers)?;
    if app.config.kind.accepts_idempotency_key() && key.is_none() {
        return Err(ApiError::MissingIdempotencyKey);
    }
    match request.sandbox_answer() {
        Some(SandboxAnswer::Rejected(code)) => {
            return Err(ApiError::Rejected {
                code,
                retryable: false,
            });
        }
        Some(SandboxAnswer::Unavailable) => return Err(ApiError::Refused),
        None => {}
    }
    let work = async {
        match delivery::create(&app.pool, &app.config, &request, key).await? {
            Creation::Accepted(delivery) => {
                app.publish(Effect::Delivered {
                    external_reference: delivery.external_reference.clone(),
                    client_reference: delivery.client_reference.clone(),
                });
                Ok((StatusCode::CREATED, Json(accepted(delivery, false))).into_response())
            }
            Creation::Replayed(delivery) => Ok(Json(accepted(delivery, true)).into_response()),
            Creation::KeyConflict { first_digest } => Err(ApiError::DeliveryKeyConflict {
                key: key.unwrap_or_default().to_owned(),
                first_digest,
            }),
        }
    };
    let request = Request::deliver(key, &request.client_reference);
    Ok(disrupted(&app.faults, request, work).await)
}

#[derive(Deserialize)]
struct LookupQuery {
    digest: Option<String>,
}

async fn look_up(
    State(app): State<AppState>,
    client_reference: Result<Path<String>, PathRejection>,
    query: Result<Query<LookupQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    if !app.config.kind.supports_lookup() {
        return Err(ApiError::LookupNotSupported);
    }
    let Path(client_reference) = client_reference?;
    let Query(LookupQuery { digest }) = query?;
    if digest.as_deref().is_some_and(|digest| !is_digest(digest)) {
        return Err(ApiError::Malformed(
            "digest must be \"sha256:\" followed by 64 lowercase hex digits".into(),
        ));
    }
    let work = async {
        let answer =
            delivery::look_up(&app.pool, &app.config, &client_reference, digest.as_deref()).await?;
        Ok(answer.into_response())
    };
    Ok(disrupted(&app.faults, Request::lookup(&client_reference), work).await)
}

async fn withdraw(
    State(app): State<AppState>,
    external_reference: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Path(external_reference) = external_reference?;
    let key = idempotency_key(&headers)?.ok_or(ApiError::MissingIdempotencyKey)?;
    let work = async {
        match delivery::withdraw(&app.pool, &app.config, &external_reference, key).await? {
            WithdrawalOutcome::Recorded(withdrawal) => {
                app.publish(Effect::Withdrawn {
                    withdrawal_reference: withdrawal.withdrawal_reference.clone(),
                    external_reference: withdrawal.external_reference.clone(),
                });
                Ok((StatusCode::CREATED, Json(withdrawn(withdrawal, false))).into_response())
            }
            WithdrawalOutcome::Replayed(withdrawal) => {
                Ok(Json(withdrawn(withdrawal, true)).into_response())
            }
            WithdrawalOutcome::KeyConflict { first_withdrawn } => {
                Err(ApiError::WithdrawalKeyConflict {
                    key: key.to_owned(),
                    first_withdrawn,
                })
            }
            WithdrawalOutcome::UnknownDelivery => {
                Err(ApiError::UnknownDelivery(external_reference.clone()))
            }
        }
    };
    let request = Request::withdraw(key, &external_reference);
    Ok(disrupted(&app.faults, request, work).await)
}

async fn ledger(State(app): State<AppState>) -> Result<Json<Ledger>, ApiError> {
    Ok(Json(Ledger::read(&app.pool, &app.config.name).await?))
}

async fn show_faults(State(app): State<AppState>) -> Json<FaultReport> {
    Json(app.faults.report())
}

async fn set_faults(
    State(app): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<FaultReport>, ApiError> {
    app.faults
        .install(parse::<FaultPlan>(&headers, &body)?, app.config.api)?;
    Ok(Json(app.faults.report()))
}

async fn clear_faults(State(app): State<AppState>) -> StatusCode {
    app.faults.clear();
    StatusCode::NO_CONTENT
}

/// How the destination protocol answers faults that replace or spoil an answer.
struct ProtocolWords;

impl FaultWords for ProtocolWords {
    fn refused(&self, _operation: Operation) -> Response {
        ApiError::Refused.into_response()
    }

    fn rejected(&self, _operation: Operation, code: String, retryable: bool) -> Response {
        ApiError::Rejected { code, retryable }.into_response()
    }

    fn lookup_unavailable(&self) -> Response {
        LookupAnswer::Unavailable.into_response()
    }

    fn lookup_processing(&self) -> Response {
        LookupAnswer::Processing.into_response()
    }

    fn server_error(&self, status: StatusCode) -> Response {
        ApiError::AfterAccept(status).into_response()
    }
}

/// Runs `work` under the fault script, worded by the destination protocol.
async fn disrupted(
    faults: &Faults,
    request: Request<'_>,
    work: impl Future<Output = Result<Response, ApiError>>,
) -> Response {
    crate::disrupt::disrupted(faults, request, &ProtocolWords, work).await
}

impl IntoResponse for LookupAnswer {
    fn into_response(self) -> Response {
        let status = match self {
            LookupAnswer::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            LookupAnswer::Found { .. }
            | LookupAnswer::FoundWithConflictingDigest { .. }
            | LookupAnswer::NotFound { .. }
            | LookupAnswer::Processing => StatusCode::OK,
        };
        (status, Json(self)).into_response()
    }
}

/// Reads a JSON body declared as `application/json` (parameters such as `charset` allowed):
/// a browser may send `text/plain` or a form to another origin without asking, never JSON.
fn parse<T: DeserializeOwned>(headers: &HeaderMap, body: &[u8]) -> Result<T, ApiError> {
    let declared_json = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"));
    if !declared_json {
        return Err(ApiError::NotJson);
    }
    Ok(serde_json::from_slice(body)?)
}

/// The `Idempotency-Key` header, if present.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY_HEADER) else {
        return Ok(None);
    };
    let key = value
        .to_str()
        .map_err(|_| ApiError::Malformed("Idempotency-Key must be visible ASCII".into()))?;
    match reference_problem("Idempotency-Key", key) {
        Some(problem) => Err(ApiError::Malformed(problem)),
        None => Ok(Some(key)),
    }
}

fn accepted(delivery: Delivery, replayed: bool) -> Accepted {
    Accepted {
        external_reference: delivery.external_reference,
        client_reference: delivery.client_reference,
        digest: delivery.digest,
        accepted_at: delivery.accepted_at,
        replayed,
    }
}

fn withdrawn(withdrawal: Withdrawal, replayed: bool) -> Withdrawn {
    Withdrawn {
        withdrawal_reference: withdrawal.withdrawal_reference,
        external_reference: withdrawal.external_reference,
        withdrawn_at: withdrawal.withdrawn_at,
        limits: WITHDRAWAL_LIMITS.to_owned(),
        replayed,
    }
}
