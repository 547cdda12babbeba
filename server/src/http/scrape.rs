//! Who may scrape figures: `GET /metrics` of a serving process and of a worker's
//! `--metrics-addr` listener answer an API token that sees every workflow, and nothing else
//! (docs/DESIGN.md §15, "What is open").

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use sqlx::PgPool;

use super::client::{ApiClient, ApiError};

/// Whether `client` may read figures: they count every team's workflows, steps and adapters,
/// which a token limited to a creation-key prefix may not read (as with the queue's counts).
fn may_scrape(client: &ApiClient) -> Result<(), ApiError> {
    if client.0.unscoped() {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "a token limited to a creation-key prefix reads no figures: they count every team's workflows",
        ))
    }
}

/// `GET /metrics` of a serving process: nothing is read or folded before the token is allowed.
pub(super) async fn scrape(client: ApiClient, State(pool): State<PgPool>) -> Response {
    match may_scrape(&client) {
        Ok(()) => crate::metrics::scrape(&pool).await,
        Err(refused) => refused.into_response(),
    }
}

/// The router of a `z29c worker --metrics-addr` listener: `GET /metrics` with the process's
/// histograms, to a token checked against `pool`.
pub fn worker_router(pool: PgPool) -> axum::Router {
    async fn scrape_process(client: ApiClient) -> Response {
        match may_scrape(&client) {
            Ok(()) => crate::metrics::scrape_process().await.into_response(),
            Err(refused) => refused.into_response(),
        }
    }
    axum::Router::new()
        .route("/metrics", axum::routing::get(scrape_process))
        .with_state(pool)
}
