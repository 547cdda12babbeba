//! Connecting to Z29C's database and keeping its schema current.

use std::time::Duration;

use sqlx::PgPool;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// The migrations in `migrations/`, embedded in the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// Errors while reaching or preparing the database.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The server could not be reached or refused the query.
    #[error("database error: {0}")]
    Sqlx(#[from] sqlx::Error),
    /// A migration could not be applied.
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

/// Opens a pool on `url` sized for `max_connections`.
pub async fn connect(url: &str, max_connections: u32) -> Result<PgPool, DbError> {
    let options: PgConnectOptions = url.parse()?;
    Ok(PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options.application_name("z29c"))
        .await?)
}

/// The small pool of anonymous work, sign-in (docs/DESIGN.md §15): a few connections, each
/// statement cut off after [`ANONYMOUS_STATEMENT_TIMEOUT_MS`], so visitors who are nobody yet
/// can never take the connections the console, the API and the workers need.
#[derive(Clone, Debug)]
pub struct AnonymousPool(pub PgPool);

/// How many connections anonymous work may hold at once.
pub const ANONYMOUS_CONNECTIONS: u32 = 4;
/// How long one of its statements may run.
pub const ANONYMOUS_STATEMENT_TIMEOUT_MS: u64 = 5_000;

impl AnonymousPool {
    /// A pool to the database `pool` reaches, connecting on first use.
    pub fn beside(pool: &PgPool) -> Self {
        AnonymousPool(pool_beside(
            pool,
            ANONYMOUS_CONNECTIONS,
            ANONYMOUS_STATEMENT_TIMEOUT_MS,
            Duration::from_secs(2),
            "z29c-anonymous",
        ))
    }
}

/// How long one statement of the console or the API may run in `z29c serve`: far beyond any
/// page's reads, short enough that a runaway one gives its connection back.
pub const CONSOLE_STATEMENT_TIMEOUT_MS: u64 = 30_000;

/// The console's and the API's own connections in `z29c serve` (docs/DESIGN.md §15), beside the
/// pool the workers and the maintenance services share: a page never waits for a connection the
/// engine holds, and each statement is cut off after [`CONSOLE_STATEMENT_TIMEOUT_MS`].
pub fn console_pool(pool: &PgPool, connections: u32) -> PgPool {
    pool_beside(
        pool,
        connections,
        CONSOLE_STATEMENT_TIMEOUT_MS,
        Duration::from_secs(10),
        "z29c-console",
    )
}

/// `connections` of their own to the database `pool` reaches, each statement cut off after
/// `timeout_ms`, waited for at most `acquire`, named `application_name` in `pg_stat_activity`;
/// connecting on first use.
fn pool_beside(
    pool: &PgPool,
    connections: u32,
    timeout_ms: u64,
    acquire: Duration,
    application_name: &str,
) -> PgPool {
    let options = (*pool.connect_options())
        .clone()
        .options([("statement_timeout", timeout_ms.to_string())])
        .application_name(application_name);
    PgPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(acquire)
        .connect_lazy_with(options)
}

/// Opens a pool on `url` sized for `max_connections` and applies pending migrations.
pub async fn connect_and_migrate(url: &str, max_connections: u32) -> Result<PgPool, DbError> {
    let pool = connect(url, max_connections).await?;
    MIGRATOR.run(&pool).await?;
    Ok(pool)
}

/// What `/readyz` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// The database answers and every embedded migration is applied.
    Ready,
    /// The database answers but its schema is behind this binary.
    MigrationsPending { applied: i64, expected: i64 },
}

/// Checks that the database answers and that every embedded migration has been applied.
pub async fn readiness(pool: &PgPool) -> Result<Readiness, DbError> {
    let expected = MIGRATOR
        .iter()
        .filter(|m| m.migration_type.is_up_migration())
        .count() as i64;
    let applied = crate::store::schema::migrations_applied(pool).await?;
    if applied >= expected {
        Ok(Readiness::Ready)
    } else {
        Ok(Readiness::MigrationsPending { applied, expected })
    }
}
