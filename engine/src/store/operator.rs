//! Operator accounts: the rows behind sign-in. Passwords arrive here already hashed.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::domain::Role;

/// An account as sign-in reads it.
#[derive(Debug, Clone)]
pub struct Account {
    pub id: Uuid,
    pub username: String,
    pub password_hash: String,
    pub role: Role,
}

/// An account as `z29c user list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub username: String,
    pub role: Role,
    pub created_at: DateTime<Utc>,
    pub disabled_at: Option<DateTime<Utc>>,
}

/// Inserts an account unless `username` is taken; whether it was inserted.
pub async fn insert(
    conn: &mut PgConnection,
    username: &str,
    password_hash: &str,
    role: Role,
) -> sqlx::Result<bool> {
    let inserted = sqlx::query!(
        r#"insert into operator (id, username, password_hash, role) values ($1, $2, $3, $4)
           on conflict (username) do nothing"#,
        Uuid::now_v7(),
        username,
        password_hash,
        role as Role,
    )
    .execute(conn)
    .await?
    .rows_affected();
    Ok(inserted > 0)
}

/// The enabled account named `username`, if there is one.
pub async fn enabled(pool: &PgPool, username: &str) -> sqlx::Result<Option<Account>> {
    sqlx::query_as!(
        Account,
        r#"select id, username, password_hash, role as "role: Role" from operator
           where username = $1 and disabled_at is null"#,
        username
    )
    .fetch_optional(pool)
    .await
}

/// The current role of operator `id`, unless the account is disabled or gone: what every
/// signed-in request re-reads (by primary key).
pub async fn standing(
    pool: &PgPool,
    id: Uuid,
    signed_in_at: DateTime<Utc>,
) -> sqlx::Result<Option<Role>> {
    sqlx::query_scalar!(
        r#"select role as "role: Role" from operator
           where id = $1 and disabled_at is null
             and (password_changed_at is null or password_changed_at <= $2)"#,
        id,
        signed_in_at as DateTime<Utc>,
    )
    .fetch_optional(pool)
    .await
}

/// Every account, by name.
pub async fn list(pool: &PgPool) -> sqlx::Result<Vec<Listed>> {
    sqlx::query_as!(
        Listed,
        r#"select username, role as "role: Role", created_at as "created_at: DateTime<Utc>",
                  disabled_at as "disabled_at: DateTime<Utc>" from operator
           order by username"#
    )
    .fetch_all(pool)
    .await
}

/// Disables (keeping the first time it was disabled) or enables `username`; whether the
/// account exists.
pub async fn set_disabled(
    conn: &mut PgConnection,
    username: &str,
    disabled: bool,
) -> sqlx::Result<bool> {
    let changed = sqlx::query!(
        r#"update operator
           set disabled_at = case when $2 then coalesce(disabled_at, now()) else null end
           where username = $1"#,
        username,
        disabled,
    )
    .execute(conn)
    .await?
    .rows_affected();
    Ok(changed > 0)
}

/// Gives `username` the role `role`; the role it had, if the account exists.
pub async fn set_role(
    conn: &mut PgConnection,
    username: &str,
    role: Role,
) -> sqlx::Result<Option<Role>> {
    sqlx::query_scalar!(
        r#"with old as (select id, role from operator where username = $1 for update)
           update operator set role = $2 from old where operator.id = old.id
           returning old.role as "role: Role""#,
        username,
        role as Role,
    )
    .fetch_optional(conn)
    .await
}

/// Replaces the password hash of `username`; whether the account exists.
pub async fn set_password_hash(
    conn: &mut PgConnection,
    username: &str,
    password_hash: &str,
) -> sqlx::Result<bool> {
    let changed = sqlx::query!(
        "update operator set password_hash = $2, password_changed_at = date_trunc('second', now())
         where username = $1",
        username,
        password_hash,
    )
    .execute(conn)
    .await?
    .rows_affected();
    Ok(changed > 0)
}
