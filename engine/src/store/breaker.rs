//! What an adapter's breaker counts (docs/DESIGN.md §20): its attempts that ended in trouble —
//! outcome unknown, or a 5xx answer — within its window, and since it was last resumed.

use chrono::{DateTime, Utc};
use sqlx::{Executor, Postgres};
use uuid::Uuid;

/// One attempt that ended in trouble.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Trouble {
    pub step: Uuid,
    pub observed_at: DateTime<Utc>,
    /// What the transport saw (`deadline_exceeded`, `unexpected_status`, …).
    pub observed: Option<String>,
    pub status: Option<String>,
}

/// Up to `limit` of adapter `name`'s troubled attempts of the last `within_secs` seconds (and
/// since its last resume), newest first, through `observation_trouble_idx`.
pub async fn trouble<'e, E>(
    executor: E,
    name: &str,
    within_secs: f64,
    limit: i64,
) -> sqlx::Result<Vec<Trouble>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_as!(
        Trouble,
        r#"select o.step_id as step, o.observed_at as "observed_at: DateTime<Utc>",
                  o.body ->> 'observed' as observed, o.body ->> 'status' as status
           from observation o join step s on s.id = o.step_id
           where (o.outcome = 'outcome_unknown'
                  or (o.outcome is not null and o.body ->> 'status' like '5%'))
             and o.observed_at > greatest(
                   now() - make_interval(secs => $2),
                   coalesce((select resumed_at from adapter where name = $1), '-infinity'))
             and s.adapter = $1
           order by o.observed_at desc
           limit $3"#,
        name,
        within_secs,
        limit,
    )
    .fetch_all(executor)
    .await
}
