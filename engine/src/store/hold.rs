//! Operators' holds on adapters (docs/DESIGN.md §20): the row that stops new requests for an
//! adapter from every worker until it is resumed.

use chrono::{DateTime, Utc};
use sqlx::{Executor, PgConnection, Postgres};

/// A hold in force.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AdapterHold {
    pub adapter: String,
    pub held_by: String,
    pub held_at: DateTime<Utc>,
    pub reason: String,
    /// Its lookups wait too.
    pub holds_lookups: bool,
    /// For a hold the adapter's breaker put on it: the attempts that tripped it.
    pub tripped_by: Option<serde_json::Value>,
}

/// What holding found.
#[derive(Debug, Clone, PartialEq)]
pub enum Holding {
    /// Held now, by this call.
    Held(AdapterHold),
    /// Held already: the hold in force is unchanged.
    Already(AdapterHold),
    /// No adapter has this name.
    Unknown,
}

/// Holds adapter `name` for `by`, unless it is held already.
pub async fn hold(
    conn: &mut PgConnection,
    name: &str,
    by: &str,
    reason: &str,
    holds_lookups: bool,
) -> sqlx::Result<Holding> {
    let held = sqlx::query_as!(
        AdapterHold,
        r#"update adapter set held_at = now(), held_by = $2, held_reason = $3, hold_lookups = $4
           where name = $1 and held_at is null
           returning name as adapter, held_by as "held_by!", held_at as "held_at!: DateTime<Utc>",
                     held_reason as "reason!", hold_lookups as holds_lookups,
                     held_evidence as tripped_by"#,
        name,
        by,
        reason,
        holds_lookups,
    )
    .fetch_optional(&mut *conn)
    .await?;
    Ok(match held {
        Some(held) => Holding::Held(held),
        None => match of(&mut *conn, name).await? {
            Some(Some(standing)) => Holding::Already(standing),
            _ => Holding::Unknown,
        },
    })
}

/// Ends the hold on adapter `name`; returns the hold it ended, if there was one.
pub async fn resume(conn: &mut PgConnection, name: &str) -> sqlx::Result<Option<AdapterHold>> {
    sqlx::query_as!(
        AdapterHold,
        r#"with before as (
               select name, held_by, held_at, held_reason, hold_lookups, held_evidence from adapter
               where name = $1 and held_at is not null for update
           ), ended as (
               update adapter a set held_at = null, held_by = null, held_reason = null,
                      hold_lookups = true, held_evidence = null, resumed_at = now()
               from before b where a.name = b.name
           )
           select name as adapter, held_by as "held_by!",
                  held_at as "held_at!: DateTime<Utc>", held_reason as "reason!",
                  hold_lookups as holds_lookups, held_evidence as tripped_by
           from before"#,
        name,
    )
    .fetch_optional(conn)
    .await
}

/// Adapter `name`'s hold: `None` when there is no such adapter, `Some(None)` when it is not held.
pub async fn of<'e, E>(executor: E, name: &str) -> sqlx::Result<Option<Option<AdapterHold>>>
where
    E: Executor<'e, Database = Postgres>,
{
    let row = sqlx::query!(
        r#"select name, held_by, held_at as "held_at: DateTime<Utc>", held_reason, hold_lookups,
                  held_evidence
           from adapter where name = $1"#,
        name
    )
    .fetch_optional(executor)
    .await?;
    Ok(row.map(|r| match (r.held_by, r.held_at, r.held_reason) {
        (Some(held_by), Some(held_at), Some(reason)) => Some(AdapterHold {
            adapter: r.name,
            held_by,
            held_at,
            reason,
            holds_lookups: r.hold_lookups,
            tripped_by: r.held_evidence,
        }),
        _ => None,
    }))
}

/// Every hold in force, by adapter.
pub async fn all<'e, E>(executor: E) -> sqlx::Result<Vec<AdapterHold>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_as!(
        AdapterHold,
        r#"select name as adapter, held_by as "held_by!", held_at as "held_at!: DateTime<Utc>",
                  held_reason as "reason!", hold_lookups as holds_lookups,
                  held_evidence as tripped_by
           from adapter where held_at is not null order by name"#
    )
    .fetch_all(executor)
    .await
}

/// Holds adapter `name` for its breaker, with `reason` and the attempts that tripped it, unless
/// it is held already (by a person, or by another process's breaker a moment ago).
pub async fn trip(
    conn: &mut PgConnection,
    name: &str,
    reason: &str,
    evidence: &serde_json::Value,
) -> sqlx::Result<Option<AdapterHold>> {
    sqlx::query_as!(
        AdapterHold,
        r#"update adapter set held_at = now(), held_by = 'breaker', held_reason = $2,
                              hold_lookups = true, held_evidence = $3
           where name = $1 and held_at is null
           returning name as adapter, held_by as "held_by!", held_at as "held_at!: DateTime<Utc>",
                     held_reason as "reason!", hold_lookups as holds_lookups,
                     held_evidence as tripped_by"#,
        name,
        reason,
        evidence,
    )
    .fetch_optional(conn)
    .await
}
