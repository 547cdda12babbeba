//! The state the router hands every handler: the pool and the console's Leptos options.

use axum::extract::FromRef;
use leptos::prelude::LeptosOptions;
use sqlx::PgPool;

/// What every handler may reach.
#[derive(Clone, FromRef)]
pub struct AppState {
    pub pool: PgPool,
    pub leptos_options: LeptosOptions,
}
