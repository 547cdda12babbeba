//! People who use the recovery console: accounts with a role, passwords stored as argon2 hashes.

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

use crate::domain::Role;
use crate::store::operator as store;

/// A signed-in person, as the console knows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operator {
    pub id: Uuid,
    pub username: String,
    pub role: Role,
}

/// Why an account could not be created.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error(
        "a username is 1 to 63 lowercase letters, digits, `.`, `_` or `-`, starting with a letter or digit"
    )]
    BadUsername,
    #[error("an operator named `{0}` exists already")]
    Exists(String),
    #[error(transparent)]
    Sqlx(sqlx::Error),
}

impl From<sqlx::Error> for OperatorError {
    fn from(error: sqlx::Error) -> Self {
        OperatorError::Sqlx(error)
    }
}

fn hash(password: &str) -> String {
    Argon2::default()
        .hash_password(password.as_bytes(), &SaltString::generate(&mut OsRng))
        .expect("argon2 hashes any password")
        .to_string()
}

/// A fresh password: 24 random characters from a UUID v4 pair (122 bits of entropy each).
fn generate_password() -> String {
    let mut password = Uuid::new_v4().simple().to_string();
    password.truncate(24);
    password
}

/// Creates `username` with `role`; returns the password, which is shown once and not stored.
pub async fn add(pool: &PgPool, username: &str, role: Role) -> Result<String, OperatorError> {
    let valid = !username.is_empty()
        && username.len() <= 63
        && username.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && username
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    if !valid {
        return Err(OperatorError::BadUsername);
    }
    let password = generate_password();
    let inserted = store::insert(pool, username, &hash(&password), role).await?;
    if !inserted {
        return Err(OperatorError::Exists(username.to_owned()));
    }
    Ok(password)
}

/// The operator whose username and password these are, if any (and not disabled).
pub async fn authenticate(
    pool: &PgPool,
    username: &str,
    password: &str,
) -> sqlx::Result<Option<Operator>> {
    let row = store::enabled(pool, username).await?;
    // Verify against some hash either way, so an unknown name takes as long as a wrong password.
    let stored = row
        .as_ref()
        .map(|r| r.password_hash.clone())
        .unwrap_or_else(|| hash("no such operator"));
    let verified = tokio::task::spawn_blocking({
        let password = password.to_owned();
        move || {
            PasswordHash::new(&stored).is_ok_and(|parsed| {
                Argon2::default()
                    .verify_password(password.as_bytes(), &parsed)
                    .is_ok()
            })
        }
    })
    .await
    .unwrap_or(false);
    Ok(row.filter(|_| verified).map(|r| Operator {
        id: r.id,
        username: r.username,
        role: r.role,
    }))
}
