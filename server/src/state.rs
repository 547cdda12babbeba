//! The state the router hands every handler: the pools and the console's Leptos options.

use axum::extract::FromRef;
use engine::db::AnonymousPool;
use leptos::prelude::LeptosOptions;
use sqlx::PgPool;

/// What every handler may reach.
#[derive(Clone, FromRef)]
pub struct AppState {
    pub pool: PgPool,
    /// The few connections sign-in may use (docs/DESIGN.md §15).
    pub anonymous: AnonymousPool,
    pub leptos_options: LeptosOptions,
}

impl AppState {
    /// The state over `pool`, with the anonymous pool beside it.
    pub fn new(pool: PgPool, leptos_options: LeptosOptions) -> Self {
        AppState {
            anonymous: AnonymousPool::beside(&pool),
            pool,
            leptos_options,
        }
    }
}
