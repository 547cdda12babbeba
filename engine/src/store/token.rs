//! API bearer tokens, stored as sha256 hashes: the token itself is shown once, at creation.

use sha2::{Digest, Sha256};
use sqlx::{Executor, Postgres};
use uuid::Uuid;

fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Creates a token named `name`; returns the secret, which is not stored.
pub async fn create<'e, E>(executor: E, name: &str) -> sqlx::Result<String>
where
    E: Executor<'e, Database = Postgres>,
{
    let secret = format!(
        "z29c_{}{}",
        Uuid::new_v4().simple(),
        Uuid::new_v4().simple()
    );
    sqlx::query!(
        r#"insert into api_token (id, name, token_hash) values ($1, $2, $3)"#,
        Uuid::now_v7(),
        name,
        hash(&secret),
    )
    .execute(executor)
    .await?;
    Ok(secret)
}

/// The name of the live token `secret`, if it is one.
pub async fn verify<'e, E>(executor: E, secret: &str) -> sqlx::Result<Option<String>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_scalar!(
        r#"select name from api_token where token_hash = $1 and revoked_at is null"#,
        hash(secret)
    )
    .fetch_optional(executor)
    .await
}
