//! The reads behind `/metrics` (docs/DESIGN.md §11): the metrics projection's counters, and
//! aggregates of durable state taken at scrape time, each served by a small partial index (the
//! waiting steps, the open incidents and alerts, the unpublished events, the attempts lost
//! during a call) so a scrape costs the same at 10k and 1M workflows.

use sqlx::PgPool;

/// Every counter of the metrics projection: (name, labels as serialized, value).
pub async fn counters(pool: &PgPool) -> sqlx::Result<Vec<(String, String, i64)>> {
    let rows =
        sqlx::query!(r#"select name, labels, value from metric_counter order by name, labels"#)
            .fetch_all(pool)
            .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.name, r.labels, r.value))
        .collect())
}

/// Steps waiting for an outcome or a person, by state: (state, steps, seconds the oldest has
/// waited).
pub async fn waiting_steps(pool: &PgPool) -> sqlx::Result<Vec<(String, i64, f64)>> {
    let rows = sqlx::query!(
        r#"select waiting::text as "state!", count(*) as "n!",
                  coalesce(extract(epoch from now() - min(unknown_since)), 0)::float8 as "oldest!"
           from step where waiting is not null group by waiting"#
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| (r.state, r.n, r.oldest)).collect())
}

/// Open integrity incidents, by kind (every kind, zero included), counted from the open
/// incidents' partial index, not from every incident ever recorded.
pub async fn open_incidents_by_kind(pool: &PgPool) -> sqlx::Result<Vec<(String, i64)>> {
    let rows = sqlx::query!(
        r#"select k::text as "kind!",
                  (select count(*) from integrity_incident i
                   where i.kind = k and i.resolved_at is null) as "open!"
           from unnest(enum_range(null::incident_kind)) k"#
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| (r.kind, r.open)).collect())
}

/// Recorded invariant violations, by kind.
pub async fn violations_by_kind(pool: &PgPool) -> sqlx::Result<Vec<(String, i64)>> {
    let rows =
        sqlx::query!(r#"select kind, count(*) as "n!" from invariant_violation group by kind"#)
            .fetch_all(pool)
            .await?;
    Ok(rows.into_iter().map(|r| (r.kind, r.n)).collect())
}

/// Attempts that ended because their worker was lost while the request was under way, counted
/// from the partial index of their ending observations alone (`observation_lost_during_call_idx`).
pub async fn lease_expiries_after_request_began(pool: &PgPool) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"select count(*) as "n!" from observation
           where outcome is not null
             and body ->> 'observed' = 'worker_lost' and body ->> 'during_call' = 'true'"#
    )
    .fetch_one(pool)
    .await
}

/// Open alerts, by rule.
pub async fn open_alerts_by_rule(pool: &PgPool) -> sqlx::Result<Vec<(String, i64)>> {
    let rows = sqlx::query!(
        r#"select rule, count(*) as "n!" from alert where resolved_at is null group by rule"#
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| (r.rule, r.n)).collect())
}

/// Outbox events not yet handed to every consumer.
pub async fn outbox_backlog(pool: &PgPool) -> sqlx::Result<i64> {
    crate::store::outbox::backlog(&mut *pool.acquire().await?).await
}
