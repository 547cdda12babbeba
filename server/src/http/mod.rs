//! The HTTP surface: the router that joins the console's pages, server functions and static
//! files, the API under `/api/v1`, the probe endpoints and `/metrics`. Every answer is
//! compressed (brotli or gzip) when the client accepts it.

pub mod api;
pub mod assets;
mod client;
mod files_api;
mod headers;
mod kept_forms;
mod ops;
mod probes;
pub mod proxy;
pub mod scrape;

use app::{App, shell};
use axum::Router;
use axum::routing::get;
use leptos::prelude::*;
use leptos_axum::{LeptosRoutes, generate_route_list};
use sqlx::PgPool;
use tower_http::compression::CompressionLayer;
use tower_sessions::cookie::{SameSite, time};
use tower_sessions::{Expiry, SessionManagerLayer};
use tower_sessions_sqlx_store::PostgresStore;

use crate::state::AppState;
use proxy::Exposure;

/// How long a console session lasts without activity.
pub const SESSION_IDLE_HOURS: i64 = 8;

/// Sessions in PostgreSQL (never in memory), behind an HTTP-only, same-site-strict, `Secure`
/// cookie (browsers accept it on http://127.0.0.1 too), named for `exposure`.
/// A row is written only once someone signs in (anonymous visitors' forms carry a stateless
/// token); besides this idle expiry, `app::auth` ends a session 12 hours after its sign-in and
/// re-reads the account on every request.
pub fn sessions(pool: &PgPool, exposure: Exposure) -> SessionManagerLayer<PostgresStore> {
    SessionManagerLayer::new(PostgresStore::new(pool.clone()))
        .with_name(exposure.session_cookie())
        .with_http_only(true)
        .with_same_site(SameSite::Strict)
        .with_secure(true)
        .with_path("/")
        .with_expiry(Expiry::OnInactivity(time::Duration::hours(
            SESSION_IDLE_HOURS,
        )))
}

/// Builds the whole router for browsers that connect directly; tests drive it with
/// `tower::ServiceExt::oneshot`.
pub fn router(state: AppState) -> Router {
    router_for(state, Exposure::Direct)
}

/// Builds the whole router for `exposure`.
pub fn router_for(state: AppState, exposure: Exposure) -> Router {
    let routes = generate_route_list(App);
    let pool = state.pool.clone();
    let anonymous = state.anonymous.clone();
    let archive = state.archive.clone();
    let options = state.leptos_options.clone();
    let router = Router::new()
        .route("/healthz", get(probes::healthz))
        .route("/readyz", get(probes::readyz))
        .route("/metrics", get(scrape::scrape))
        .merge(api::routes())
        .merge(assets::routes(&state.leptos_options))
        .leptos_routes_with_context(
            &state,
            routes,
            move || {
                provide_context(pool.clone());
                provide_context(anonymous.clone());
                provide_context(archive.clone());
                provide_context(app::auth::api::Standing::default());
            },
            move || shell(options.clone()),
        )
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(axum::middleware::from_fn(kept_forms::keep_refused_forms))
        // Every route, the console's forms and server functions included, reads at most this.
        .layer(tower_http::limit::RequestBodyLimitLayer::new(
            api::MAX_BODY_BYTES,
        ))
        .layer(axum::middleware::from_fn(client::refusals_as_json))
        .layer(sessions(&state.pool, exposure))
        .layer(axum::middleware::from_fn(headers::security_headers))
        .layer(CompressionLayer::new())
        .layer(axum::middleware::from_fn(crate::metrics::time_request));
    let router = match exposure {
        Exposure::Direct => router,
        Exposure::BehindTlsProxy => {
            router.layer(axum::middleware::from_fn(proxy::client_from_proxy))
        }
    };
    router.with_state(state)
}
