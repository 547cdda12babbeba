//! Operator accounts: the rows behind sign-in. Passwords arrive here already hashed.

use sqlx::PgPool;
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

/// Inserts an account unless `username` is taken; whether it was inserted.
pub async fn insert(
    pool: &PgPool,
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
    .execute(pool)
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
