//! The state the router hands every handler: the pools and the console's Leptos options.

use axum::extract::FromRef;
use engine::archive::ArchiveDir;
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
    /// Where archived workflows are read back from (docs/DESIGN.md §21).
    pub archive: ArchiveDir,
}

impl AppState {
    /// The state over `pool`, with the anonymous pool beside it, reading archived workflows
    /// from the default archive (`.z29c/archive`).
    pub fn new(pool: PgPool, leptos_options: LeptosOptions) -> Self {
        AppState {
            anonymous: AnonymousPool::beside(&pool),
            pool,
            leptos_options,
            archive: ArchiveDir::at(".z29c/archive"),
        }
    }

    /// What `z29c serve` answers with: the console's and the API's own `connections` beside
    /// the engine's `pool` ([`engine::db::console_pool`]), so pages never queue behind the
    /// workers for a connection.
    pub fn beside_engine(pool: &PgPool, connections: u32, leptos_options: LeptosOptions) -> Self {
        Self::new(engine::db::console_pool(pool, connections), leptos_options)
    }

    /// The same state, reading archived workflows from `archive`.
    pub fn with_archive(self, archive: ArchiveDir) -> Self {
        AppState { archive, ..self }
    }
}
