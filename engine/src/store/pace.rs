//! Outbound limits in the database (docs/DESIGN.md §20): an approver's override of an adapter's
//! declared limits, and the pace every worker process's claim reads and advances — the moment
//! the adapter's next call may leave, and the places its calls in flight hold.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{Executor, PgConnection, Postgres};
use uuid::Uuid;

use crate::domain::Limits;
use crate::domain::limits::Pace;

/// An approver's override of an adapter's limits, in force until it is cleared.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LimitOverride {
    pub adapter: String,
    pub limits: Limits,
    pub set_by: String,
    pub set_at: DateTime<Utc>,
    pub reason: String,
}

/// Locks adapter `name`'s row until the transaction ends and says when its override was set
/// (`None` inside: no override); `None` when no adapter has the name.
pub async fn lock_override(
    conn: &mut PgConnection,
    name: &str,
) -> sqlx::Result<Option<Option<DateTime<Utc>>>> {
    let row = sqlx::query!(
        r#"select limited_at as "limited_at: DateTime<Utc>" from adapter where name = $1 for update"#,
        name
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| r.limited_at))
}

/// Sets adapter `name`'s override; returns the one it replaced, `Err(())` when no adapter has
/// the name.
pub async fn set(
    conn: &mut PgConnection,
    name: &str,
    limits: Limits,
    by: &str,
    reason: &str,
) -> sqlx::Result<Result<Option<LimitOverride>, ()>> {
    let before = match of(&mut *conn, name).await? {
        None => return Ok(Err(())),
        Some(before) => before,
    };
    sqlx::query!(
        r#"update adapter set limit_requests_per_second = $2, limit_in_flight = $3,
                              limited_by = $4, limited_at = now(), limit_reason = $5
           where name = $1"#,
        name,
        limits.requests_per_second,
        limits.in_flight.map(|n| n as i32),
        by,
        reason,
    )
    .execute(conn)
    .await?;
    Ok(Ok(before))
}

/// Clears adapter `name`'s override; returns the one it cleared.
pub async fn clear(conn: &mut PgConnection, name: &str) -> sqlx::Result<Option<LimitOverride>> {
    let before = of(&mut *conn, name).await?.flatten();
    sqlx::query!(
        r#"update adapter set limit_requests_per_second = null, limit_in_flight = null,
                              limited_by = null, limited_at = null, limit_reason = null
           where name = $1"#,
        name,
    )
    .execute(conn)
    .await?;
    Ok(before)
}

/// Adapter `name`'s override: `None` when there is no such adapter, `Some(None)` without one.
pub async fn of<'e, E>(executor: E, name: &str) -> sqlx::Result<Option<Option<LimitOverride>>>
where
    E: Executor<'e, Database = Postgres>,
{
    let mut overrides = overrides(executor, Some(name)).await?;
    Ok(overrides.pop().map(|(_, over)| over))
}

/// Every adapter's override (`name`'s only, when given), by name: `None` for an adapter without
/// one.
pub async fn overrides<'e, E>(
    executor: E,
    name: Option<&str>,
) -> sqlx::Result<Vec<(String, Option<LimitOverride>)>>
where
    E: Executor<'e, Database = Postgres>,
{
    let rows = sqlx::query!(
        r#"select name, limit_requests_per_second, limit_in_flight, limited_by,
                  limited_at as "limited_at: DateTime<Utc>", limit_reason
           from adapter where $1::text is null or name = $1 order by name"#,
        name
    )
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let over = match (r.limited_by, r.limited_at, r.limit_reason) {
                (Some(set_by), Some(set_at), Some(reason)) => Some(LimitOverride {
                    adapter: r.name.clone(),
                    limits: Limits {
                        requests_per_second: r.limit_requests_per_second,
                        in_flight: r.limit_in_flight.map(|n| n as u32),
                    },
                    set_by,
                    set_at,
                    reason,
                }),
                _ => None,
            };
            (r.name, over)
        })
        .collect())
}

/// Every adapter's file (its current version's source) and override, by name: what
/// `adapter::apply::limits_in_force` reads the limits in force from.
pub async fn declared_and_overridden<'e, E>(
    executor: E,
) -> sqlx::Result<Vec<(String, Option<String>, Limits)>>
where
    E: Executor<'e, Database = Postgres>,
{
    let rows = sqlx::query!(
        r#"select name, source, limit_requests_per_second, limit_in_flight
           from adapter order by name"#
    )
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let over = Limits {
                requests_per_second: r.limit_requests_per_second,
                in_flight: r.limit_in_flight.map(|n| n as u32),
            };
            (r.name, r.source, over)
        })
        .collect())
}

/// Locks adapter `name`'s pace for this transaction (creating it the first time) and reads it
/// at the database's clock as it is now (`clock_timestamp()`, not the transaction's start, which
/// may be long past): when its next call may leave, and how many of its calls hold a place in
/// flight, after freeing the places of steps that no longer hold the lease they were admitted
/// under. Returns the pace and the moment it was read (seconds since the epoch), which
/// [`admit`] counts from.
pub async fn lock(conn: &mut PgConnection, name: &str) -> sqlx::Result<(Pace, f64)> {
    sqlx::query!(
        "insert into adapter_pace (adapter) values ($1) on conflict (adapter) do nothing",
        name
    )
    .execute(&mut *conn)
    .await?;
    // The row lock first: a claim that waited for another's commit reads the clock after the
    // wait, not before it (a reading from before would shift all its moments late, onto the
    // next claim's).
    sqlx::query!(
        "select adapter from adapter_pace where adapter = $1 for update",
        name
    )
    .fetch_one(&mut *conn)
    .await?;
    let read = sqlx::query!(
        r#"with at as (select clock_timestamp() as at)
           select extract(epoch from at.at)::float8 as "at!",
                  extract(epoch from greatest(next_send_at, at.at) - at.at)::float8 as "secs!"
           from adapter_pace, at where adapter = $1"#,
        name
    )
    .fetch_one(&mut *conn)
    .await?;
    let in_flight = sqlx::query_scalar!(
        r#"with freed as (
               delete from adapter_flight f where f.adapter = $1 and not exists (
                   select 1 from step s join lease l on l.id = s.lease_id
                   where s.id = f.step_id and s.lease_id = f.lease_id and l.expires_at > now())
               returning f.step_id
           )
           select (select count(*) from adapter_flight where adapter = $1)
                  - (select count(*) from freed) as "n!""#,
        name
    )
    .fetch_one(&mut *conn)
    .await?;
    let pace = Pace {
        next_after: Duration::from_secs_f64(read.secs.max(0.0)),
        in_flight: u32::try_from(in_flight).unwrap_or(u32::MAX),
    };
    Ok((pace, read.at))
}

/// Records what a claim admitted: the adapter's next moment, `next_after` from `read_at` (the
/// moment [`lock`] read the pace), and, when it has an in-flight limit, a place for each
/// admitted step under `lease`.
pub async fn admit(
    conn: &mut PgConnection,
    name: &str,
    (read_at, next_after): (f64, Duration),
    lease: Uuid,
    places: &[Uuid],
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"update adapter_pace set next_send_at = to_timestamp($2::float8 + $3::float8) where adapter = $1"#,
        name,
        read_at,
        next_after.as_secs_f64(),
    )
    .execute(&mut *conn)
    .await?;
    if !places.is_empty() {
        sqlx::query!(
            r#"insert into adapter_flight (adapter, step_id, lease_id)
               select $1, unnest($2::uuid[]), $3
               on conflict (adapter, step_id) do update set lease_id = excluded.lease_id"#,
            name,
            places,
            lease,
        )
        .execute(conn)
        .await?;
    }
    Ok(())
}
