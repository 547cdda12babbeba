//! Queries over the `workflow` table.

use sqlx::{Executor, Postgres};

use crate::domain::WorkflowState;

/// How many workflows are in each state; states with none are omitted.
pub async fn count_by_state<'e, E>(executor: E) -> sqlx::Result<Vec<(WorkflowState, i64)>>
where
    E: Executor<'e, Database = Postgres>,
{
    let rows = sqlx::query!(
        r#"select state as "state: WorkflowState", count(*) as "count!"
           from workflow group by state order by state"#
    )
    .fetch_all(executor)
    .await?;
    Ok(rows.into_iter().map(|r| (r.state, r.count)).collect())
}
