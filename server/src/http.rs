//! The HTTP surface: the console's pages and server functions, and the probe endpoints.

use app::{App, shell};
use axum::Router;
use axum::extract::{FromRef, State};
use axum::http::StatusCode;
use axum::routing::get;
use engine::db::Readiness;
use leptos::prelude::*;
use leptos_axum::{LeptosRoutes, generate_route_list};
use sqlx::PgPool;
use tower_sessions::cookie::{SameSite, time};
use tower_sessions::{Expiry, SessionManagerLayer};
use tower_sessions_sqlx_store::PostgresStore;

/// What every handler may reach.
#[derive(Clone, FromRef)]
pub struct AppState {
    pub pool: PgPool,
    pub leptos_options: LeptosOptions,
}

/// How long a console session lasts without activity.
pub const SESSION_IDLE_HOURS: i64 = 8;

/// Sessions in PostgreSQL (never in memory), behind an HTTP-only, same-site-strict cookie that
/// is `Secure` unless `secure_cookies` is off (browsers accept it on http://127.0.0.1 too).
pub fn sessions(pool: &PgPool, secure_cookies: bool) -> SessionManagerLayer<PostgresStore> {
    SessionManagerLayer::new(PostgresStore::new(pool.clone()))
        .with_name("z29c_session")
        .with_http_only(true)
        .with_same_site(SameSite::Strict)
        .with_secure(secure_cookies)
        .with_expiry(Expiry::OnInactivity(time::Duration::hours(
            SESSION_IDLE_HOURS,
        )))
}

/// Builds the whole router; tests drive it with `tower::ServiceExt::oneshot`.
pub fn router(state: AppState) -> Router {
    let routes = generate_route_list(App);
    let pool = state.pool.clone();
    let options = state.leptos_options.clone();
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(crate::metrics::scrape))
        .merge(crate::api::routes())
        .leptos_routes_with_context(
            &state,
            routes,
            move || provide_context(pool.clone()),
            move || shell(options.clone()),
        )
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(sessions(&state.pool, true))
        .with_state(state)
}

/// The process is up and serving HTTP.
async fn healthz() -> &'static str {
    "ok\n"
}

/// The database answers and its schema is current.
async fn readyz(State(pool): State<PgPool>) -> (StatusCode, String) {
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
