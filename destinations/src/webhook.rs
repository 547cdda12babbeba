//! The partner webhook receiver (`PAYMENTS.md`): `POST /webhooks/{channel}` with a JSON body
//! signed by `X-Signature: sha256=<hex HMAC-SHA256(secret, body)>`. Every valid POST is a new
//! event: it deduplicates nothing, offers no lookup and no withdrawal.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use hmac::{Hmac, Mac};
use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

mod store;

use self::store::NewEvent;
use crate::config::Secret;
use crate::disrupt::{FaultWords, disrupted};
use crate::faults::{Operation, Request};
use crate::ledger::Effect;
use crate::state::AppState;

/// The header that carries the body's signature.
pub const SIGNATURE_HEADER: &str = "x-signature";

/// A channel `sandbox-reject-CODE` is refused `422 {"error": CODE}`, nothing recorded.
pub const SANDBOX_REJECT: &str = "sandbox-reject-";
/// The channel `sandbox-unavailable` is refused `503`, nothing recorded.
pub const SANDBOX_UNAVAILABLE: &str = "sandbox-unavailable";

/// The longest channel name accepted.
pub const MAX_CHANNEL_LEN: usize = 100;

/// The answer to a received event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Received {
    /// Always true.
    pub received: bool,
    /// `evt_` and 24 letters and digits.
    pub id: String,
}

/// Every other answer: `{"error": "…"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookError {
    /// A fixed sentence (`invalid signature`, …).
    pub error: String,
}

/// `sha256=` and the lowercase hex HMAC-SHA256 of `body` under `secret`: the `X-Signature`
/// value a sender must present.
pub fn signature(secret: &Secret, body: &[u8]) -> String {
    format!(
        "sha256={}",
        hex::encode(mac(secret, body).finalize().into_bytes())
    )
}

fn mac(secret: &Secret, body: &[u8]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256>>::new_from_slice(secret.expose().as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(body);
    mac
}

/// Whether `presented` signs `body` under `secret`, compared in constant time.
fn signed(secret: &Secret, body: &[u8], presented: &str) -> bool {
    let Some(hex) = presented.strip_prefix("sha256=") else {
        return false;
    };
    if hex.bytes().any(|b| b.is_ascii_uppercase()) {
        return false;
    }
    match hex::decode(hex) {
        Ok(tag) => mac(secret, body).verify_slice(&tag).is_ok(),
        Err(_) => false,
    }
}

/// The receiver's one endpoint.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/webhooks/{channel}", post(receive))
        .fallback(|| async { refusal(StatusCode::NOT_FOUND, "no such endpoint") })
}

fn refusal(status: StatusCode, error: &str) -> Response {
    let error = error.to_owned();
    (status, Json(WebhookError { error })).into_response()
}

async fn receive(
    State(app): State<AppState>,
    Path(channel): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let declared_json = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"));
    if !declared_json {
        return refusal(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be JSON, sent with Content-Type: application/json",
        );
    }
    let presented = headers
        .get(SIGNATURE_HEADER)
        .and_then(|value| value.to_str().ok());
    let valid = match (&app.config.signing_secret, presented) {
        (Some(secret), Some(presented)) => signed(secret, &body, presented.trim()),
        _ => false,
    };
    if !valid {
        return refusal(StatusCode::UNAUTHORIZED, "invalid signature");
    }
    let Ok(event) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return refusal(StatusCode::BAD_REQUEST, "the body is not valid JSON");
    };
    if channel.is_empty() || channel.chars().count() > MAX_CHANNEL_LEN {
        return refusal(
            StatusCode::BAD_REQUEST,
            "the channel must be 1 to 100 characters",
        );
    }
    // Test-mode channels (PAYMENTS.md, "Sandbox values"): refused before anything is recorded.
    if let Some(code) = channel.strip_prefix(SANDBOX_REJECT) {
        return refusal(StatusCode::UNPROCESSABLE_ENTITY, code);
    }
    if channel == SANDBOX_UNAVAILABLE {
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable; nothing was recorded",
        );
    }
    let subject = event.get("subject").and_then(serde_json::Value::as_str);
    let request = Request::by_subject(Operation::Deliver, subject, None, None);
    let work = record(&app, &channel, subject, &body);
    disrupted(&app.faults, request, &WebhookWords, work).await
}

async fn record(app: &AppState, channel: &str, subject: Option<&str>, body: &[u8]) -> Response {
    let id = crate::random::id("evt_");
    // The body is valid JSON (checked above) and UTF-8 (JSON is), kept as sent.
    let text = String::from_utf8_lossy(body);
    let now = app.config.clock.fixed_now();
    let event = NewEvent {
        destination: &app.config.name,
        id: &id,
        channel,
        subject,
        body: &text,
    };
    let inserted = store::insert_event(&app.pool, &event, now).await;
    if let Err(error) = inserted {
        tracing::error!(%error, "webhook destination database error");
        return refusal(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
    }
    app.publish(Effect::Received {
        id: id.clone(),
        channel: channel.to_owned(),
        subject: subject.map(str::to_owned),
    });
    Json(Received { received: true, id }).into_response()
}

/// How the receiver answers faults: refusals and rejections record nothing.
struct WebhookWords;

impl FaultWords for WebhookWords {
    fn refused(&self, _operation: Operation) -> Response {
        refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable; nothing was recorded",
        )
    }

    fn rejected(&self, _operation: Operation, code: String, _retryable: bool) -> Response {
        refusal(StatusCode::UNPROCESSABLE_ENTITY, &code)
    }

    // The receiver has no lookup: plans aiming at it are refused (`FaultPlan::validate_for`).
    fn lookup_unavailable(&self) -> Response {
        refusal(StatusCode::NOT_FOUND, "no such endpoint")
    }

    fn lookup_processing(&self) -> Response {
        refusal(StatusCode::NOT_FOUND, "no such endpoint")
    }

    fn server_error(&self, status: StatusCode) -> Response {
        refusal(status, "internal error")
    }
}
