//! The status projection of one workflow, as the API and the user-facing page show it, and
//! the customer's sentence read back from the stored projection.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::definition::Catalog;
use crate::domain::StepState;
use crate::domain::WorkflowState;
use crate::domain::words::{DuplicateStatus, StepWords, status_sentence, withdrawal_sentence};

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
    let rows = sqlx::query!(
        r#"select s.id, s.logical, s.generation, s.state as "state: StepState", s.attempt_count, s.depends_on,
                  s.request_key, r.external_reference as "external_reference?",
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
           from step s left join receipt r on r.id = s.receipt_id
           where s.workflow_id = $1
           order by s.created_at, s.generation"#,
        id
    )
    .fetch_all(&mut *conn)
    .await?;
    // The sentence speaks of the definition's status step, in the definition's words.
    let (status_step, words) =
        status_words(conn, &workflow.definition_name, workflow.definition_version).await?;
    let mut sentence = status_sentence(&words, StepState::Ready, None, DuplicateStatus::None);
    let steps = rows
        .into_iter()
        .map(|r| {
            if r.logical == status_step {
                let duplicate = match r.duplicate.as_deref() {
                    Some("open") => DuplicateStatus::Open,
                    Some("withdrawn") if r.withdrawals_done == Some(true) => {
                        DuplicateStatus::Withdrawn
                    }
                    Some("withdrawn") => DuplicateStatus::WithdrawalRequested,
                    Some("unresolved") => DuplicateStatus::AcceptedUnresolved,
                    _ => DuplicateStatus::None,
                };
                sentence = match r.cancel_withdrawn {
                    Some(withdrawn) => withdrawal_sentence(&words, withdrawn),
                    None => {
                        status_sentence(&words, r.state, r.external_reference.as_deref(), duplicate)
                    }
                };
            }
            StepStatus {
                id: r.id,
                logical: r.logical,
                generation: r.generation,
                state: r.state,
                label: r.state.label(),
                attempts: r.attempt_count,
                request_key: r.request_key,
                external_reference: r.external_reference,
                depends_on: r.depends_on,
            }
        })
        .collect();
    Ok(Some(WorkflowStatus {
        id: workflow.id,
        creation_key: workflow.creation_key,
        definition: workflow.definition_name,
        definition_version: workflow.definition_version,
        state: workflow.state,
        status: sentence,
        revision: workflow.revision,
        created_at: workflow.created_at,
        updated_at: workflow.updated_at,
        steps,
    }))
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
