//! The cluster's own bookkeeping: which databases exist and which migrations are applied.

use sqlx::{PgConnection, PgPool};

/// Migrations applied successfully to this database (zero before the first `migrate`).
pub async fn migrations_applied(pool: &PgPool) -> sqlx::Result<i64> {
    let bookkept =
        sqlx::query_scalar!(r#"select to_regclass('_sqlx_migrations') is not null as "bookkept!""#)
            .fetch_one(pool)
            .await?;
    if !bookkept {
        return Ok(0);
    }
    sqlx::query_scalar!(r#"select count(*) as "applied!" from _sqlx_migrations where success"#)
        .fetch_one(pool)
        .await
}

/// Whether the cluster has a database named `database`.
pub async fn database_exists(conn: &mut PgConnection, database: &str) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"select exists(select 1 from pg_database where datname = $1) as "exists!""#,
        database
    )
    .fetch_one(conn)
    .await
}
