//! The status projection of one workflow, as the API and the user-facing page show it, and
//! the customer's sentence read back from the stored projection.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::definition::Catalog;
use crate::domain::StepState;
use crate::domain::WorkflowState;
use crate::domain::words::{DuplicateStatus, StepWords, status_sentence, withdrawal_sentence};
use crate::store::pause::WorkflowPause;

/// One step as the status projection shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct StepStatus {
    pub id: Uuid,
    pub logical: String,
    pub generation: i32,
    pub state: StepState,
    pub label: &'static str,
    pub attempts: i32,
    pub request_key: Option<String>,
    pub external_reference: Option<String>,
    /// The logical steps whose receipts this one waits for.
    pub depends_on: Vec<String>,
}

/// A workflow as the status projection shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct WorkflowStatus {
    pub id: Uuid,
    pub creation_key: String,
    pub definition: String,
    pub definition_version: i32,
    pub state: WorkflowState,
    /// The sentence of docs/DESIGN.md §14.
    pub status: String,
    pub revision: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// An operator paused it: no step of it starts until it is resumed (docs/DESIGN.md §20).
    pub paused: Option<WorkflowPause>,
    /// When it left the hot tables for the archive (docs/DESIGN.md §21); read back from there.
    pub archived_at: Option<DateTime<Utc>>,
    /// For a workflow in the hot tables: when the archive wrote the copy of it that reconciling
    /// after a restore noted (docs/DESIGN.md §21, "After a restore"); `z29c archive show ID`
    /// prints it. The API fills it in; other readers leave it out.
    pub archive_copy_at: Option<DateTime<Utc>>,
    pub steps: Vec<StepStatus>,
}

/// Projects workflow `id` from durable state.
pub async fn project(pool: &PgPool, id: Uuid) -> sqlx::Result<Option<WorkflowStatus>> {
    project_on(&mut *pool.acquire().await?, id).await
}

/// [`project`], inside the caller's transaction (a consumer's, which commits with it).
pub async fn project_on(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<Option<WorkflowStatus>> {
    let Some(workflow) = crate::store::workflow::by_id(&mut *conn, id).await? else {
        return Ok(None);
    };
    let rows = step_rows(conn, &[id], None).await?;
    let (status_step, words) =
        status_words(conn, &workflow.definition_name, workflow.definition_version).await?;
    let status = sentence(&rows, &status_step, &words);
    let steps = rows
        .into_iter()
        .map(|r| StepStatus {
            id: r.id,
            logical: r.logical,
            generation: r.generation,
            state: r.state,
            label: r.state.label(),
            attempts: r.attempt_count,
            request_key: r.request_key,
            external_reference: r.external_reference,
            depends_on: r.depends_on,
        })
        .collect();
    Ok(Some(WorkflowStatus {
        id: workflow.id,
        creation_key: workflow.creation_key,
        definition: workflow.definition_name,
        definition_version: workflow.definition_version,
        state: workflow.state,
        status,
        revision: workflow.revision,
        created_at: workflow.created_at,
        updated_at: workflow.updated_at,
        paused: crate::store::pause::of(&mut *conn, id).await?,
        archived_at: None,
        archive_copy_at: None,
        steps,
    }))
}

/// What a status consumer records of one workflow: its state, the revision that reflects, and
/// the customer's sentence.
#[derive(Debug, Clone, PartialEq)]
pub struct Projected {
    pub workflow: Uuid,
    pub state: WorkflowState,
    pub revision: i64,
    pub sentence: String,
}

/// [`project_on`] for many workflows in three statements inside the caller's transaction,
/// keeping only what the status and notification consumers record.
pub async fn project_many(conn: &mut PgConnection, ids: &[Uuid]) -> sqlx::Result<Vec<Projected>> {
    let workflows = sqlx::query!(
        r#"select id, definition_name, definition_version, state as "state: WorkflowState", revision
           from workflow where id = any($1)"#,
        ids
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut said = Vec::with_capacity(workflows.len());
    for w in &workflows {
        said.push(status_words(conn, &w.definition_name, w.definition_version).await?);
    }
    // Only the status steps speak in the sentence: the others' rows are not read.
    let mut status_steps: Vec<String> = said.iter().map(|(step, _)| step.clone()).collect();
    status_steps.sort_unstable();
    status_steps.dedup();
    // Planned for this batch, never from a plan PostgreSQL keeps after five executions: the one
    // it kept, made while receipts were few, scanned every receipt once per step as they grew
    // (docs/DESIGN.md §10). For the rest of the caller's transaction.
    sqlx::query("set local plan_cache_mode = force_custom_plan")
        .execute(&mut *conn)
        .await?;
    let rows = step_rows(conn, ids, Some(&status_steps)).await?;
    let mut by_workflow: HashMap<Uuid, Vec<&StepRow>> = HashMap::with_capacity(workflows.len());
    for r in &rows {
        by_workflow.entry(r.workflow_id).or_default().push(r);
    }
    let mut projected = Vec::with_capacity(workflows.len());
    for (w, (status_step, words)) in workflows.into_iter().zip(said) {
        let own = by_workflow.remove(&w.id).unwrap_or_default();
        projected.push(Projected {
            workflow: w.id,
            state: w.state,
            revision: w.revision,
            sentence: sentence(own, &status_step, &words),
        });
    }
    Ok(projected)
}

/// What the status rows of `workflows` say where they reflect their workflow's current
/// revision (a flush or the status consumer made them so): no need to project those again.
pub async fn current(conn: &mut PgConnection, workflows: &[Uuid]) -> sqlx::Result<Vec<Projected>> {
    let rows = sqlx::query!(
        r#"select p.workflow_id, p.state as "state: WorkflowState", p.revision, p.sentence
           from status_projection p join workflow w on w.id = p.workflow_id
           where p.workflow_id = any($1) and p.revision = w.revision"#,
        workflows
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Projected {
            workflow: r.workflow_id,
            state: r.state,
            revision: r.revision,
            sentence: r.sentence,
        })
        .collect())
}

/// One step as the projection reads it, with what its sentence depends on.
struct StepRow {
    workflow_id: Uuid,
    id: Uuid,
    logical: String,
    generation: i32,
    state: StepState,
    attempt_count: i32,
    depends_on: Vec<String>,
    request_key: Option<String>,
    external_reference: Option<String>,
    duplicate: Option<String>,
    withdrawals_done: Option<bool>,
    cancel_withdrawn: Option<bool>,
}

/// The steps of `workflows` (distinct ids; only the steps named in `only`, when given), each
/// workflow's in the order they were made.
async fn step_rows(
    conn: &mut PgConnection,
    workflows: &[Uuid],
    only: Option<&[String]>,
) -> sqlx::Result<Vec<StepRow>> {
    sqlx::query_as!(
        StepRow,
        r#"select s.workflow_id, s.id, s.logical, s.generation, s.state as "state: StepState",
                  s.attempt_count, s.depends_on,
                  s.request_key, s.external_reference as "external_reference?",
                  (select case when bool_or(i.resolved_at is null) then 'open'
                               when bool_or(i.disposition = 'withdrawal_requested') then 'withdrawn'
                               when bool_or(i.disposition = 'accepted_unresolved') then 'unresolved' end
                   from integrity_incident i where i.step_id = s.id and i.kind = 'duplicate_effect') as duplicate,
                  (select bool_and(cs.state = 'succeeded') from compensation_link c
                   join step cs on cs.id = c.compensation_step_id
                   where c.original_step_id = s.id and c.incident_id is not null) as withdrawals_done,
                  (select bool_and(cs.state = 'succeeded') from compensation_link c
                   join step cs on cs.id = c.compensation_step_id
                   where c.original_step_id = s.id and c.incident_id is null) as cancel_withdrawn
           from unnest($1::uuid[]) as wf(id)
           -- Each workflow's steps by its index, never a scan of every step row: the fence
           -- (`offset 0`) holds the probes whatever the statistics say of the batch's share.
           cross join lateral (
               select s.*, r.external_reference from step s left join receipt r on r.id = s.receipt_id
               where s.workflow_id = wf.id and ($2::text[] is null or s.logical = any($2))
               offset 0
           ) s
           order by s.workflow_id, s.created_at, s.generation, s.id"#,
        workflows,
        only as Option<&[String]>
    )
    .fetch_all(conn)
    .await
}

/// The customer's sentence: the definition's status step in its words (the latest row of that
/// step counts, so a replacement speaks for the step it replaced).
fn sentence<'r>(
    rows: impl IntoIterator<Item = &'r StepRow>,
    status_step: &str,
    words: &StepWords,
) -> String {
    let mut sentence = status_sentence(words, StepState::Ready, None, DuplicateStatus::None);
    for r in rows.into_iter().filter(|r| r.logical == status_step) {
        let duplicate = match r.duplicate.as_deref() {
            Some("open") => DuplicateStatus::Open,
            Some("withdrawn") if r.withdrawals_done == Some(true) => DuplicateStatus::Withdrawn,
            Some("withdrawn") => DuplicateStatus::WithdrawalRequested,
            Some("unresolved") => DuplicateStatus::AcceptedUnresolved,
            _ => DuplicateStatus::None,
        };
        sentence = match r.cancel_withdrawn {
            Some(withdrawn) => withdrawal_sentence(words, withdrawn),
            None => status_sentence(words, r.state, r.external_reference.as_deref(), duplicate),
        };
    }
    sentence
}

/// The step the sentence speaks of, and its words: the definition's status step.
async fn status_words(
    conn: &mut PgConnection,
    name: &str,
    version: i32,
) -> sqlx::Result<(String, StepWords)> {
    Ok(match Catalog::get(&mut *conn, name, version).await {
        Ok(definition) => {
            let step = definition.status_step().to_owned();
            let words = definition.words(&step);
            (step, words)
        }
        Err(crate::definition::CatalogError::Sqlx(e)) => return Err(e),
        Err(_) => (String::new(), StepWords::named("step")),
    })
}

/// The customer's sentence for `workflow` and when it last changed, from the status
/// projection; re-projected from durable state when the projection has no row yet.
pub async fn customer_status(
    pool: &PgPool,
    workflow: Uuid,
) -> sqlx::Result<Option<(String, chrono::DateTime<chrono::Utc>)>> {
    if let Some(row) = sqlx::query!(
        r#"select sentence, updated_at as "updated_at: chrono::DateTime<chrono::Utc>"
           from status_projection where workflow_id = $1"#,
        workflow
    )
    .fetch_optional(pool)
    .await?
    {
        return Ok(Some((row.sentence, row.updated_at)));
    }
    Ok(project(pool, workflow)
        .await?
        .map(|s| (s.status, s.updated_at)))
}
