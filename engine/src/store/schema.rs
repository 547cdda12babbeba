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

/// Creates login role `role` unless it exists, gives it `password` (when the server asks for
/// one), and grants it what `z29c_grant_application` grants in this database (call it after
/// the migrations). Two processes starting at once: one does it, the other waits, then redoes
/// it, which changes nothing.
pub async fn ensure_application_role(
    conn: &mut sqlx::PgConnection,
    role: &str,
    password: Option<&str>,
) -> sqlx::Result<()> {
    use sqlx::Connection;
    let valid = |text: &str| text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    assert!(
        valid(role) && password.is_none_or(valid),
        "a role and a password of letters, digits and `_`: they are written into the statements"
    );
    let mut tx = conn.begin().await?;
    sqlx::query("select pg_advisory_xact_lock(hashtext('z29c application role'))")
        .execute(&mut *tx)
        .await?;
    sqlx::raw_sql(&format!(
        "do $$ begin
             if not exists (select from pg_roles where rolname = '{role}') then
                 create role {role} login;
             end if;
         end $$;"
    ))
    .execute(&mut *tx)
    .await?;
    if let Some(password) = password {
        sqlx::raw_sql(&format!(
            "set local password_encryption = 'scram-sha-256';
             alter role {role} password '{password}'"
        ))
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query("select z29c_grant_application($1)")
        .bind(role)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}
