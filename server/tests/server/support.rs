//! What every server test starts from: the router over a pool, as `serve` builds it.

use leptos::prelude::LeptosOptions;
use server::http::router;
use server::state::AppState;
use sqlx::PgPool;

/// The router `serve` mounts, over `pool`.
pub fn app(pool: PgPool) -> axum::Router {
    router(AppState {
        pool,
        leptos_options: LeptosOptions::builder().output_name("z29c").build(),
    })
}
