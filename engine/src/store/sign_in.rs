//! Sign-in attempts, as throttling counts them, and the key of the anonymous sign-in form token.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// The failures an arriving attempt follows, counted when it was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recent {
    /// The arriving attempt's row, recorded as a failure until its password matches.
    pub id: i64,
    /// When it arrived (the database's clock, shared by every server process).
    pub now: DateTime<Utc>,
    /// Earlier failures for the same name within the window, and the latest of them.
    pub name_failures: i64,
    pub name_last: Option<DateTime<Utc>>,
    /// Earlier failures from the same address within the window, and the latest of them.
    pub address_failures: i64,
    pub address_last: Option<DateTime<Utc>>,
}

/// Records an attempt for `username` from `address` as a failure, and counts the failures
/// before it within `window_seconds` for the name and, when `match_address` is given, for the
/// address. Served by `sign_in_attempt_username_idx` and `sign_in_attempt_address_idx`.
pub async fn record(
    pool: &PgPool,
    username: &str,
    address: &str,
    match_address: Option<&str>,
    window_seconds: i64,
) -> sqlx::Result<Recent> {
    sqlx::query_as!(
        Recent,
        r#"with mine as (
               insert into sign_in_attempt (username, address) values ($1, $2) returning id, at
           ),
           by_name as (
               select count(*) as failures, max(at) as last from sign_in_attempt
               where username = $1 and not succeeded
                 and at > now() - make_interval(secs => $4)
           ),
           by_address as (
               select count(*) as failures, max(at) as last from sign_in_attempt
               where address = $3 and not succeeded
                 and at > now() - make_interval(secs => $4)
           )
           select mine.id as "id!", mine.at as "now!: DateTime<Utc>",
                  by_name.failures as "name_failures!", by_name.last as "name_last: DateTime<Utc>",
                  by_address.failures as "address_failures!", by_address.last as "address_last: DateTime<Utc>"
           from mine, by_name, by_address"#,
        username,
        address,
        match_address,
        window_seconds as f64,
    )
    .fetch_one(pool)
    .await
}

/// Deletes the attempts older than `seconds`; how many there were.
pub async fn forget_older_than(pool: &PgPool, seconds: i64) -> sqlx::Result<u64> {
    let deleted = sqlx::query!(
        "delete from sign_in_attempt where at < now() - make_interval(secs => $1)",
        seconds as f64
    )
    .execute(pool)
    .await?
    .rows_affected();
    Ok(deleted)
}

/// Counts a failed attempt for `username` from `address` in its `window_seconds` window
/// (`throttled` when it was refused before its password was checked).
pub async fn count_failure(
    pool: &PgPool,
    username: &str,
    address: &str,
    throttled: bool,
    window_seconds: i64,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into sign_in_failure (username, window_start, failures, throttled, last_address)
           values ($1, to_timestamp(floor(extract(epoch from now()) / $4) * $4), 1, $3::int, $2)
           on conflict (username, window_start) do update
              set failures = sign_in_failure.failures + 1,
                  throttled = sign_in_failure.throttled + excluded.throttled,
                  last_address = excluded.last_address, last_at = now()"#,
        username,
        address,
        i32::from(throttled),
        window_seconds as f64,
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// One name's failed sign-ins in one window, as `z29c user failures` lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureRow {
    pub username: String,
    pub window_start: DateTime<Utc>,
    pub failures: i32,
    pub throttled: i32,
    pub last_address: String,
    pub last_at: DateTime<Utc>,
}

/// The newest `limit` failure counts, newest window first.
pub async fn failures(pool: &PgPool, limit: i64) -> sqlx::Result<Vec<FailureRow>> {
    sqlx::query_as!(
        FailureRow,
        r#"select username, window_start as "window_start: DateTime<Utc>", failures, throttled,
                  last_address, last_at as "last_at: DateTime<Utc>"
           from sign_in_failure order by window_start desc, username limit $1"#,
        limit
    )
    .fetch_all(pool)
    .await
}

/// Deletes the failure counts last touched more than `days` ago; how many there were.
pub async fn forget_failures_older_than(pool: &PgPool, days: i64) -> sqlx::Result<u64> {
    let deleted = sqlx::query!(
        "delete from sign_in_failure where last_at < now() - make_interval(days => $1::int)",
        days as i32
    )
    .execute(pool)
    .await?
    .rows_affected();
    Ok(deleted)
}

/// Marks attempt `id` as the one whose password matched.
pub async fn succeeded(pool: &PgPool, id: i64) -> sqlx::Result<()> {
    sqlx::query!(
        "update sign_in_attempt set succeeded = true where id = $1",
        id
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// The key of the anonymous sign-in form token: `fresh` is stored if there is none yet, and
/// whichever key was stored first is returned, so every process signs with the same one.
pub async fn form_key(pool: &PgPool, fresh: &[u8]) -> sqlx::Result<Vec<u8>> {
    if let Some(key) = sqlx::query_scalar!("select key from sign_in_key")
        .fetch_optional(pool)
        .await?
    {
        return Ok(key);
    }
    sqlx::query!(
        "insert into sign_in_key (key) values ($1) on conflict (id) do nothing",
        fresh
    )
    .execute(pool)
    .await?;
    sqlx::query_scalar!("select key from sign_in_key")
        .fetch_one(pool)
        .await
}
