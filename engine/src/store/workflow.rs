//! Queries over the `workflow` table.

use serde_json::Value;
use sqlx::{Executor, PgConnection, Postgres};
use uuid::Uuid;

use crate::domain::{EventKind, WorkflowState, event};

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

/// A workflow as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowRow {
    pub id: Uuid,
    pub creation_key: String,
    pub definition_name: String,
    pub definition_version: i32,
    pub input: Value,
    pub input_digest: String,
    pub state: WorkflowState,
    pub revision: i64,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

/// The fields of a workflow about to be recorded.
#[derive(Debug, Clone)]
pub struct NewWorkflowRow<'a> {
    pub id: Uuid,
    pub creation_key: &'a str,
    pub definition_name: &'a str,
    pub definition_version: i32,
    pub input: &'a Value,
    pub input_digest: &'a str,
    /// What admission knows of its steps: every one settled, and at least one.
    pub all_settled: bool,
    pub any_settled: bool,
    /// The revision of its last event at admission before a state change.
    pub revision: i64,
}

/// Inserts the workflow unless its creation key exists, in the state the database's rule
/// (`workflow_state_from`, docs/DESIGN.md §10) derives from what admission knows: nothing
/// cancelled, nothing to review. Returns that state and the revision, one past `revision` when
/// the state is not `pending` (its change is an event); none when the key existed.
pub async fn insert_unless_exists(
    conn: &mut PgConnection,
    new: &NewWorkflowRow<'_>,
) -> sqlx::Result<Option<(WorkflowState, i64)>> {
    let inserted = sqlx::query!(
        r#"insert into workflow (id, creation_key, definition_name, definition_version, input, input_digest,
                                 state, revision, settled_at)
           select $1, $2, $3, $4, $5, $6, st, $9::bigint + (st <> 'pending')::int,
                  workflow_settled_at(st, null)
           from workflow_state_from(false, false, $7, $8) st
           on conflict (creation_key) do nothing
           returning state as "state: WorkflowState", revision"#,
        new.id,
        new.creation_key,
        new.definition_name,
        new.definition_version,
        new.input,
        new.input_digest,
        new.all_settled,
        new.any_settled,
        new.revision,
    )
    .fetch_optional(conn)
    .await?;
    Ok(inserted.map(|r| (r.state, r.revision)))
}

/// The workflow with this creation key.
pub async fn by_creation_key(
    conn: &mut PgConnection,
    creation_key: &str,
) -> sqlx::Result<Option<WorkflowRow>> {
    sqlx::query_as!(
        WorkflowRow,
        r#"select id, creation_key, definition_name, definition_version, input, input_digest,
                  state as "state: WorkflowState", revision,
                  created_at as "created_at: _", updated_at as "updated_at: _"
           from workflow where creation_key = $1"#,
        creation_key
    )
    .fetch_optional(conn)
    .await
}

/// The workflow with this id.
pub async fn by_id<'e, E>(executor: E, id: Uuid) -> sqlx::Result<Option<WorkflowRow>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_as!(
        WorkflowRow,
        r#"select id, creation_key, definition_name, definition_version, input, input_digest,
                  state as "state: WorkflowState", revision,
                  created_at as "created_at: _", updated_at as "updated_at: _"
           from workflow where id = $1"#,
        id
    )
    .fetch_optional(executor)
    .await
}

/// Moves the workflow to `state` and bumps its revision; returns the new revision.
pub async fn set_state(
    conn: &mut PgConnection,
    id: Uuid,
    state: WorkflowState,
) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"update workflow set state = $2, revision = revision + 1, updated_at = now(),
                  settled_at = workflow_settled_at($2, settled_at)
           where id = $1 returning revision"#,
        id,
        state as WorkflowState,
    )
    .fetch_one(conn)
    .await
}

/// Recomputes the workflow's state from its steps and open incidents (the rule is the
/// database's `workflow_state_of`, docs/DESIGN.md §10); when it changed, records
/// the new state with a bumped revision and an outbox event in the caller's transaction.
pub async fn refresh_state(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<WorkflowState> {
    let row = sqlx::query!(
        r#"select w.state as "current: WorkflowState", d.state as "next!: WorkflowState"
           from workflow w cross join lateral workflow_state_of(w.id) d
           where w.id = $1"#,
        id
    )
    .fetch_one(&mut *conn)
    .await?;
    let next = row.next;
    if next != row.current {
        let revision = set_state(conn, id, next).await?;
        super::journal::emit(
            conn,
            id,
            revision,
            EventKind::WorkflowStateChanged,
            &event::state_changed(row.current, next),
        )
        .await?;
    }
    Ok(next)
}

/// Bumps the workflow's revision and emits an outbox event carrying it.
pub async fn announce(
    conn: &mut PgConnection,
    id: Uuid,
    kind: EventKind,
    payload: &Value,
) -> sqlx::Result<i64> {
    // One round trip: the revision bump and its event.
    sqlx::query_scalar!(
        r#"with bumped as (
               update workflow set revision = revision + 1, updated_at = now() where id = $1
               returning revision
           )
           insert into outbox (event_id, workflow_id, revision, kind, payload)
           select $2, $1, revision, $3, $4 from bumped
           returning revision as "revision!""#,
        id,
        Uuid::now_v7(),
        kind.as_str(),
        payload,
    )
    .fetch_one(conn)
    .await
}
