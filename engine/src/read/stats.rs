//! The overview's figures: workflows by state, step states per logical step, duplicate
//! incidents, and how long the waiting steps have waited. None of them groups every row: the
//! state counts are kept as rows change (a trigger appends each change to a delta table, a
//! reader folds the deltas into the counts; migration `cheap_figures`), and the waiting steps
//! are read from their small partial index. The review queue's counts are kept the same way
//! and folded here too (`read::queue::queue_counts`).

use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::domain::{StepState, WorkflowState};

/// What the overview charts: workflows by state, step states per logical step, duplicate
/// incidents, and how long the waiting steps have waited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeStats {
    /// Workflows by state, the states with none left out.
    pub workflows: Vec<(WorkflowState, i64)>,
    /// (logical step, state, steps).
    pub by_step: Vec<(String, StepState, i64)>,
    pub duplicates_open: i64,
    pub duplicates_resolved: i64,
    /// Waiting steps by age: under a minute, under 10 min, under an hour, under a day, older.
    pub unknown_age: [i64; 5],
}

/// Folds the state changes appended since the last fold into the counts, unless another reader
/// is folding right now (then its fold serves both). The work is the number of changes since
/// the last fold, whatever the number of workflows.
///
/// One statement, its own transaction: a page that folds waits for one round trip, not four
/// (begin, lock, fold, commit). The fold commits without waiting for its WAL to reach disk: the
/// pages that fold are reads, and must not queue behind the engine's commits for a write that
/// changes no total. A crash that loses the fold loses all of it, deltas and counts together,
/// and a later fold redoes it.
pub async fn fold_counts(pool: &PgPool) -> sqlx::Result<()> {
    sqlx::query!(
        r#"with turn as materialized (
                    select pg_try_advisory_xact_lock(2912160301) as mine,
                           set_config('synchronous_commit', 'off', true) as asynchronous),
                workflows as (delete from workflow_state_delta where (select mine from turn)
                              returning state, n),
                workflows_kept as (
                    insert into workflow_state_count (state, n)
                    select state, sum(n) from workflows group by state order by state
                    on conflict (state) do update set n = workflow_state_count.n + excluded.n),
                steps as (delete from step_state_delta where (select mine from turn)
                          returning logical, state, n),
                steps_kept as (
                    insert into step_state_count (logical, state, n)
                    select logical, state, sum(n) from steps group by logical, state order by logical, state
                    on conflict (logical, state) do update set n = step_state_count.n + excluded.n),
                waiting as (delete from step_waiting_delta where (select mine from turn)
                            returning state, adapter, n)
           insert into step_waiting_count (state, adapter, n)
           select state, adapter, sum(n) from waiting group by state, adapter order by state, adapter
           on conflict (state, adapter) do update set n = step_waiting_count.n + excluded.n"#
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// The overview's figures, read at once. The kept counts are read as the counts plus the
/// changes not yet folded, each in one snapshot, so the fold that runs beside them (on another
/// connection) is counted once, whether it commits before or after them.
pub async fn outcome_stats(pool: &PgPool) -> sqlx::Result<OutcomeStats> {
    let ((), workflows, by_step, incidents, ages) = tokio::try_join!(
        fold_counts(pool),
        sqlx::query!(
            r#"select state as "state!: WorkflowState", sum(n)::bigint as "n!"
               from (select state, n from workflow_state_count
                     union all select state, n from workflow_state_delta) c
               group by state having sum(n) <> 0 order by state"#
        )
        .fetch_all(pool),
        sqlx::query!(
            r#"select logical as "logical!", state as "state!: StepState", sum(n)::bigint as "n!"
               from (select logical, state, n from step_state_count
                     union all select logical, state, n from step_state_delta) c
               group by 1, 2 having sum(n) <> 0 order by 1, 2"#
        )
        .fetch_all(pool),
        sqlx::query!(
            r#"select count(*) filter (where resolved_at is null) as "open!",
                      count(*) filter (where resolved_at is not null) as "resolved!"
               from integrity_incident where kind = 'duplicate_effect'"#
        )
        .fetch_one(pool),
        sqlx::query!(
            r#"select count(*) filter (where age < interval '1 minute') as "a!",
                      count(*) filter (where age >= interval '1 minute' and age < interval '10 minutes') as "b!",
                      count(*) filter (where age >= interval '10 minutes' and age < interval '1 hour') as "c!",
                      count(*) filter (where age >= interval '1 hour' and age < interval '1 day') as "d!",
                      count(*) filter (where age >= interval '1 day') as "e!"
               from (select now() - unknown_since as age from step
                     where waiting is not null) w"#
        )
        .fetch_one(pool),
    )?;
    let by_step = by_step
        .into_iter()
        .map(|r| (r.logical, r.state, r.n))
        .collect();
    Ok(OutcomeStats {
        workflows: workflows.into_iter().map(|r| (r.state, r.n)).collect(),
        by_step,
        duplicates_open: incidents.open,
        duplicates_resolved: incidents.resolved,
        unknown_age: [ages.a, ages.b, ages.c, ages.d, ages.e],
    })
}
