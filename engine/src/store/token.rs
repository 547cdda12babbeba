//! API bearer tokens, stored as sha256 hashes: the token itself is shown once, at creation.
//! Each carries a role (what it may do) and an optional creation-key prefix (which workflows it
//! may start and read); creating and revoking one is audited.

use chrono::{DateTime, Utc};
use serde_json::json;
use sha2::{Digest, Sha256};
use sqlx::{Executor, PgPool, Postgres};
use uuid::Uuid;

use crate::domain::AuditAction;
use crate::domain::Role;
use crate::store::journal::{self, Actor};

fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A token to create.
#[derive(Debug, Clone, Copy)]
pub struct NewToken<'a> {
    /// Who the token is for; the audit log names API calls by it.
    pub name: &'a str,
    /// viewer reads status; operator and approver also start workflows.
    pub role: Role,
    /// When set, the token starts and reads only workflows whose creation key begins with it.
    pub creation_key_prefix: Option<&'a str>,
    /// Whether it may change configuration (definitions and adapters; any token without a
    /// prefix reads it): a privilege of its own, apart from the role, never with a
    /// creation-key prefix.
    pub may_configure: bool,
    /// When set, it changes nothing beyond these adapters (names, or patterns with one `*`):
    /// the workflows it starts call only these, and it acts, holds and configures only theirs.
    pub adapters: Option<&'a [String]>,
    /// The person it is issued to: four eyes counts its actions as theirs.
    pub on_behalf_of: Option<&'a str>,
}

/// What a live token may do, as [`verify`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub id: Uuid,
    pub name: String,
    pub role: Role,
    pub creation_key_prefix: Option<String>,
    pub may_configure: bool,
    pub adapters: Option<Vec<String>>,
}

impl Grant {
    /// Whether the token may see or start the workflow created under `creation_key`.
    pub fn covers(&self, creation_key: &str) -> bool {
        self.creation_key_prefix
            .as_deref()
            .is_none_or(|prefix| creation_key.starts_with(prefix))
    }

    /// Whether the token may use adapter `name` (or, for a pattern a definition lists, every
    /// adapter the pattern names): any, without `--adapters`; else one its list names.
    pub fn may_use(&self, name: &str) -> bool {
        crate::domain::names::within(self.adapters.as_deref(), name)
    }

    /// Whether the token sees every workflow: only such a token may read queue counts,
    /// incidents and configuration, which span every team.
    pub fn unscoped(&self) -> bool {
        self.creation_key_prefix.is_none()
    }
}

/// One token as `z29c token list` shows it (never its secret, which is not stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRow {
    pub name: String,
    pub role: Role,
    pub creation_key_prefix: Option<String>,
    pub may_configure: bool,
    pub adapters: Option<Vec<String>>,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// Why a token command was refused, in a sentence.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("a live token named `{0}` already exists: revoke it first or choose another name")]
    NameTaken(String),
    #[error("no live token is named `{0}`")]
    NoSuchToken(String),
    #[error(
        "a token name is 1 to 100 characters with no control characters, and a creation-key prefix 1 to 200"
    )]
    Invalid,
    #[error(
        "a token that may configure acts on every team's definitions and adapters, so it cannot be limited to a creation-key prefix"
    )]
    ConfigureWithPrefix,
    #[error("`{0}` is neither an adapter name nor a pattern with one `*`")]
    BadAdapterPattern(String),
    #[error("a token limited to adapters names at least one")]
    NoAdapters,
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
}

fn valid(text: &str, max: usize) -> bool {
    !text.is_empty() && text.chars().count() <= max && !text.chars().any(char::is_control)
}

/// Creates a token, recording who created it in the audit log in the same transaction; returns
/// the secret, which is not stored.
pub async fn create(
    pool: &PgPool,
    new: &NewToken<'_>,
    actor: Actor<'_>,
) -> Result<String, TokenError> {
    if !valid(new.name, 100) || !new.creation_key_prefix.is_none_or(|p| valid(p, 200)) {
        return Err(TokenError::Invalid);
    }
    if new.may_configure && new.creation_key_prefix.is_some() {
        return Err(TokenError::ConfigureWithPrefix);
    }
    if let Some(adapters) = new.adapters {
        match adapters
            .iter()
            .find(|p| !crate::domain::names::is_adapter_pattern(p))
        {
            Some(bad) => return Err(TokenError::BadAdapterPattern(bad.clone())),
            None if adapters.is_empty() => return Err(TokenError::NoAdapters),
            None => {}
        }
    }
    let secret = format!(
        "z29c_{}{}",
        Uuid::new_v4().simple(),
        Uuid::new_v4().simple()
    );
    let mut tx = pool.begin().await?;
    // Two creations of one name at once: the second waits here and then sees the first.
    sqlx::query!(
        "select pg_advisory_xact_lock(hashtext('api_token:' || $1))",
        new.name
    )
    .execute(&mut *tx)
    .await?;
    let taken = sqlx::query_scalar!(
        r#"select exists (select from api_token where name = $1 and revoked_at is null) as "taken!""#,
        new.name
    )
    .fetch_one(&mut *tx)
    .await?;
    if taken {
        return Err(TokenError::NameTaken(new.name.to_owned()));
    }
    sqlx::query!(
        r#"insert into api_token (id, name, token_hash, role, creation_key_prefix, may_configure, adapters,
                                  on_behalf_of)
           values ($1, $2, $3, $4, $5, $6, $7, $8)"#,
        Uuid::now_v7(),
        new.name,
        hash(&secret),
        new.role as Role,
        new.creation_key_prefix,
        new.may_configure,
        new.adapters,
        new.on_behalf_of,
    )
    .execute(&mut *tx)
    .await?;
    let details = json!({
        "token": new.name,
        "role": new.role,
        "creation_key_prefix": new.creation_key_prefix,
        "may_configure": new.may_configure,
        "adapters": new.adapters,
        "on_behalf_of": new.on_behalf_of,
    });
    journal::audit_unattached(&mut tx, actor, AuditAction::TokenCreate, None, details).await?;
    tx.commit().await?;
    Ok(secret)
}

/// Revokes the live token named `name`, recording it in the audit log in the same transaction.
pub async fn revoke(pool: &PgPool, name: &str, actor: Actor<'_>) -> Result<(), TokenError> {
    let mut tx = pool.begin().await?;
    let revoked = sqlx::query_scalar!(
        r#"update api_token set revoked_at = now()
           where name = $1 and revoked_at is null returning id"#,
        name
    )
    .fetch_all(&mut *tx)
    .await?;
    if revoked.is_empty() {
        return Err(TokenError::NoSuchToken(name.to_owned()));
    }
    journal::audit_unattached(
        &mut tx,
        actor,
        AuditAction::TokenRevoke,
        None,
        json!({ "token": name }),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Every token, live and revoked, oldest first.
pub async fn list<'e, E>(executor: E) -> sqlx::Result<Vec<TokenRow>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_as!(
        TokenRow,
        r#"select name, role as "role: Role", creation_key_prefix, may_configure, adapters,
                  created_at as "created_at: DateTime<Utc>", revoked_at as "revoked_at: DateTime<Utc>"
           from api_token order by created_at, name"#
    )
    .fetch_all(executor)
    .await
}

/// What the live token `secret` may do, if it is one.
pub async fn verify<'e, E>(executor: E, secret: &str) -> sqlx::Result<Option<Grant>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_as!(
        Grant,
        r#"select id, name, role as "role: Role", creation_key_prefix, may_configure, adapters
           from api_token where token_hash = $1 and revoked_at is null"#,
        hash(secret)
    )
    .fetch_optional(executor)
    .await
}
