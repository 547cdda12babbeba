//! The probe endpoints an orchestrator polls: `/healthz` (the process serves HTTP) and
//! `/readyz` (its database answers with a current schema).

use axum::extract::State;
use axum::http::StatusCode;
use engine::db::Readiness;
use sqlx::PgPool;

/// The process is up and serving HTTP.
pub(super) async fn healthz() -> &'static str {
    "ok\n"
}

/// The database answers and its schema is current.
pub(super) async fn readyz(State(pool): State<PgPool>) -> (StatusCode, String) {
    match engine::db::readiness(&pool).await {
        Ok(Readiness::Ready) => (StatusCode::OK, "ready\n".into()),
        Ok(Readiness::MigrationsPending { applied, expected }) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {applied} of {expected} migrations applied\n"),
        ),
        Err(error) => {
            tracing::warn!(%error, "readiness check failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: the database does not answer\n".into(),
            )
        }
    }
}
