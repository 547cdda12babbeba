//! People who use the recovery console: accounts with a role, passwords stored as argon2 hashes,
//! sign-in with throttling, and the account commands behind `z29c user`.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use argon2::Argon2;
use argon2::password_hash::rand_core::{OsRng, RngCore};
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use sqlx::PgPool;
use tokio::sync::Semaphore;
use uuid::Uuid;

use crate::domain::AuditAction;
use crate::domain::Role;
use crate::store::journal::{self, Actor};
use crate::store::operator as store;

pub use crate::store::operator::Listed;
pub use throttle::{
    FAILURE_WINDOW_SECONDS, FREE_FAILURES_PER_ADDRESS, FREE_FAILURES_PER_NAME,
    LONGEST_WAIT_SECONDS, SignIn, TYPED_NAME_LIMIT, ThrottledBy, UNKNOWN_ADDRESS,
    forget_old_attempts, sign_in, wait_seconds,
};
pub use who::{Operator, Via};

mod limiter;
mod throttle;
mod who;

/// Why an account could not be created or changed.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error(
        "a username is 1 to 63 lowercase letters, digits, `.`, `_` or `-`, starting with a letter or digit"
    )]
    BadUsername,
    #[error("an operator named `{0}` exists already")]
    Exists(String),
    #[error("no operator is named `{0}`")]
    NotFound(String),
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
}

/// How many Argon2 runs (hashes or verifications) may go on at once in this process: each takes
/// about 19 MiB and a core, so a burst of sign-ins queues here instead of starving the runtime.
pub const ARGON2_CONCURRENCY: usize = 2;
static ARGON2_PERMITS: Semaphore = Semaphore::const_new(ARGON2_CONCURRENCY);
static HASHES: AtomicU64 = AtomicU64::new(0);
static VERIFICATIONS: AtomicU64 = AtomicU64::new(0);

/// Argon2 runs of this process so far: `(hashes, verifications)`. Tests read it to show that
/// every sign-in does the same work, and that a throttled one does none.
pub fn argon2_runs() -> (u64, u64) {
    (
        HASHES.load(Ordering::Relaxed),
        VERIFICATIONS.load(Ordering::Relaxed),
    )
}

/// What an unknown (or disabled) name's password is checked against, so that it costs exactly
/// what a wrong password costs: one verification with the same parameters. Hashed once per
/// process, on the first check of any name.
static DUMMY_HASH: LazyLock<String> = LazyLock::new(|| hash_now("z29c: no such operator"));

fn hash_now(password: &str) -> String {
    HASHES.fetch_add(1, Ordering::Relaxed);
    Argon2::default()
        .hash_password(password.as_bytes(), &SaltString::generate(&mut OsRng))
        .expect("argon2 hashes any password")
        .to_string()
}

/// Runs `work` on the blocking pool once a permit is free; `None` if it panicked.
async fn in_argon2_pool<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let _permit = ARGON2_PERMITS.acquire().await.ok()?;
    tokio::task::spawn_blocking(work).await.ok()
}

async fn hash(password: String) -> String {
    in_argon2_pool(move || hash_now(&password))
        .await
        .expect("argon2 hashes any password")
}

/// Whether `password` matches `stored`, or, for no account, one verification against the dummy.
async fn verify(stored: Option<String>, password: &str) -> bool {
    let password = password.to_owned();
    in_argon2_pool(move || {
        let stored = stored.as_deref().unwrap_or(DUMMY_HASH.as_str());
        VERIFICATIONS.fetch_add(1, Ordering::Relaxed);
        PasswordHash::new(stored).is_ok_and(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
    })
    .await
    .unwrap_or(false)
}

/// A fresh password: 32 hex characters, 128 bits from the operating system's random source.
fn generate_password() -> String {
    let mut bytes = [0u8; 16];
    OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
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
    let hashed = hash(password.clone()).await;
    let inserted = store::insert(&mut *pool.acquire().await?, username, &hashed, role).await?;
    if !inserted {
        return Err(OperatorError::Exists(username.to_owned()));
    }
    Ok(password)
}

/// The operator whose username and password these are, if any (and not disabled). Whatever the
/// name, this runs exactly one Argon2 verification.
pub async fn authenticate(
    pool: &PgPool,
    username: &str,
    password: &str,
) -> sqlx::Result<Option<Operator>> {
    let row = store::enabled(pool, username).await?;
    let verified = verify(row.as_ref().map(|r| r.password_hash.clone()), password).await;
    Ok(row.filter(|_| verified).map(|r| Operator {
        id: r.id,
        username: r.username,
        role: r.role,
        via: Via::Console,
        adapters: None,
    }))
}

/// The enabled operator named `username`, acting from the command line (whoever can reach the
/// database may act as any operator: the CLI's trust boundary is the database credentials).
pub async fn named(pool: &PgPool, username: &str) -> sqlx::Result<Option<Operator>> {
    Ok(store::enabled(pool, username).await?.map(|r| Operator {
        id: r.id,
        username: r.username,
        role: r.role,
        via: Via::Cli,
        adapters: None,
    }))
}

/// The current role of operator `id` for a session signed in at `signed_in_at`, or `None`
/// once the account is disabled or gone, or its password was reset after that sign-in (to the
/// second: a sign-in in the same second as the reset still stands).
pub async fn standing(
    pool: &PgPool,
    id: Uuid,
    signed_in_at: chrono::DateTime<chrono::Utc>,
) -> sqlx::Result<Option<Role>> {
    store::standing(pool, id, signed_in_at).await
}

/// Every account, by name (the listing is audited as `operator_listed`).
pub async fn list(pool: &PgPool, actor: Actor<'_>) -> sqlx::Result<Vec<Listed>> {
    let listed = store::list(pool).await?;
    let details = serde_json::json!({ "count": listed.len() });
    journal::audit_unattached(
        &mut *pool.acquire().await?,
        actor,
        AuditAction::OperatorListed,
        None,
        details,
    )
    .await?;
    Ok(listed)
}

/// Disables `username`: nothing is deleted, and their open sessions are signed out on their
/// next request (the console re-reads the account on each one).
pub async fn disable(pool: &PgPool, username: &str, actor: Actor<'_>) -> Result<(), OperatorError> {
    set_disabled(pool, username, true, actor).await
}

/// Enables `username` again.
pub async fn enable(pool: &PgPool, username: &str, actor: Actor<'_>) -> Result<(), OperatorError> {
    set_disabled(pool, username, false, actor).await
}

async fn set_disabled(
    pool: &PgPool,
    username: &str,
    disabled: bool,
    actor: Actor<'_>,
) -> Result<(), OperatorError> {
    let mut tx = pool.begin().await?;
    if !store::set_disabled(&mut tx, username, disabled).await? {
        return Err(OperatorError::NotFound(username.to_owned()));
    }
    let action = if disabled {
        AuditAction::OperatorDisabled
    } else {
        AuditAction::OperatorEnabled
    };
    journal::audit_unattached(
        &mut tx,
        actor,
        action,
        None,
        serde_json::json!({ "username": username }),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Gives `username` the role `role`, effective on their next request; the role they had.
pub async fn set_role(
    pool: &PgPool,
    username: &str,
    role: Role,
    actor: Actor<'_>,
) -> Result<Role, OperatorError> {
    let mut tx = pool.begin().await?;
    let Some(previous) = store::set_role(&mut tx, username, role).await? else {
        return Err(OperatorError::NotFound(username.to_owned()));
    };
    let details = serde_json::json!({ "username": username, "from": previous, "to": role });
    journal::audit_unattached(&mut tx, actor, AuditAction::OperatorRoleSet, None, details).await?;
    tx.commit().await?;
    Ok(previous)
}

/// Gives `username` a new generated password; returns it, to be shown once.
pub async fn reset_password(
    pool: &PgPool,
    username: &str,
    actor: Actor<'_>,
) -> Result<String, OperatorError> {
    let password = generate_password();
    let hashed = hash(password.clone()).await;
    let mut tx = pool.begin().await?;
    if !store::set_password_hash(&mut tx, username, &hashed).await? {
        return Err(OperatorError::NotFound(username.to_owned()));
    }
    let details = serde_json::json!({ "username": username });
    journal::audit_unattached(
        &mut tx,
        actor,
        AuditAction::OperatorPasswordReset,
        None,
        details,
    )
    .await?;
    tx.commit().await?;
    Ok(password)
}

/// The sign-in form's token for visitors who have no session: stateless, so an anonymous visit
/// stores nothing. It is `ISSUED.MAC`, the issue time (Unix seconds) and HMAC-SHA256 over it
/// under a key kept in the database (`sign_in_key`, shared by every server process), accepted
/// for [`form_token::MAX_AGE_SECONDS`]. Once signed in, forms carry the session's own token.
pub mod form_token {
    use argon2::password_hash::rand_core::{OsRng, RngCore};
    use sha2::Sha256;
    use sqlx::PgPool;

    /// How long a sign-in form may stay open before it must be reloaded.
    pub const MAX_AGE_SECONDS: i64 = 2 * 60 * 60;
    /// How far ahead of this process's clock another process's token may be dated.
    const SKEW_SECONDS: i64 = 60;
    const PURPOSE: &[u8] = b"z29c sign-in form ";

    /// A token issued now.
    pub async fn issue(pool: &PgPool) -> sqlx::Result<String> {
        Ok(issue_at(&key(pool).await?, chrono::Utc::now().timestamp()))
    }

    /// Whether `sent` is a token this console issued within the last two hours.
    pub async fn verify(pool: &PgPool, sent: &str) -> sqlx::Result<bool> {
        Ok(verify_at(
            &key(pool).await?,
            sent,
            chrono::Utc::now().timestamp(),
        ))
    }

    async fn key(pool: &PgPool) -> sqlx::Result<Vec<u8>> {
        let mut fresh = [0u8; 32];
        OsRng.fill_bytes(&mut fresh);
        crate::store::sign_in::form_key(pool, &fresh).await
    }

    /// The token issued at `issued` under `key`.
    pub fn issue_at(key: &[u8], issued: i64) -> String {
        let mac = hmac_sha256(key, &[PURPOSE, issued.to_string().as_bytes()].concat());
        format!("{issued}.{}", hex::encode(mac))
    }

    /// Whether `sent` was issued under `key` no more than [`MAX_AGE_SECONDS`] before `now`.
    pub fn verify_at(key: &[u8], sent: &str, now: i64) -> bool {
        let Some(issued) = sent
            .split_once('.')
            .and_then(|(t, _)| t.parse::<i64>().ok())
        else {
            return false;
        };
        let fresh = issued <= now + SKEW_SECONDS && now - issued <= MAX_AGE_SECONDS;
        fresh && same(issue_at(key, issued).as_bytes(), sent.as_bytes())
    }

    /// `a == b`, in a time that depends only on their lengths.
    pub fn same(a: &[u8], b: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        a.ct_eq(b).into()
    }

    /// HMAC-SHA256 (RFC 2104) of `message` under `key`.
    pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
        use hmac::{Hmac, Mac};
        let mut mac =
            Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts a key of any length");
        mac.update(message);
        mac.finalize().into_bytes().into()
    }
}
