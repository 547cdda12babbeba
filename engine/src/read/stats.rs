//! The overview's figures: step states per logical step, duplicate incidents, and how long
//! the waiting steps have waited, read from durable state.

use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::domain::StepState;

/// What the overview charts: step states per logical step, duplicate incidents, and how long
/// the waiting steps have waited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeStats {
    /// (logical step, state, steps).
    pub by_step: Vec<(String, StepState, i64)>,
    pub duplicates_open: i64,
    pub duplicates_resolved: i64,
    /// Waiting steps by age: under a minute, under 10 min, under an hour, under a day, older.
    pub unknown_age: [i64; 5],
}

/// The overview's figures, read from durable state.
pub async fn outcome_stats(pool: &PgPool) -> sqlx::Result<OutcomeStats> {
    let by_step = sqlx::query!(
        r#"select logical, state as "state: StepState", count(*) as "n!"
           from step group by 1, 2 order by 1, 2"#
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| (r.logical, r.state, r.n))
    .collect();
    let incidents = sqlx::query!(
        r#"select count(*) filter (where resolved_at is null) as "open!",
                  count(*) filter (where resolved_at is not null) as "resolved!"
           from integrity_incident where kind = 'duplicate_effect'"#
    )
    .fetch_one(pool)
    .await?;
    let ages = sqlx::query!(
        r#"select count(*) filter (where age < interval '1 minute') as "a!",
                  count(*) filter (where age >= interval '1 minute' and age < interval '10 minutes') as "b!",
                  count(*) filter (where age >= interval '10 minutes' and age < interval '1 hour') as "c!",
                  count(*) filter (where age >= interval '1 hour' and age < interval '1 day') as "d!",
                  count(*) filter (where age >= interval '1 day') as "e!"
           from (select now() - unknown_since as age from step
                 where state in ('outcome_unknown', 'review_required', 'rejected')) w"#
    )
    .fetch_one(pool)
    .await?;
    Ok(OutcomeStats {
        by_step,
        duplicates_open: incidents.open,
        duplicates_resolved: incidents.resolved,
        unknown_age: [ages.a, ages.b, ages.c, ages.d, ages.e],
    })
}
