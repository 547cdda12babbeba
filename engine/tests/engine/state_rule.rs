//! The workflow-state rule, written once in the database (`workflow_state_of`, docs/DESIGN.md
//! §10), walked over every step state, replaced steps and incidents, through the two paths that
//! apply it: one workflow's `refresh_state` and a flush's `conclusion::announce`.

use engine::domain::{StepState, WorkflowState};
use engine::store::{conclusion, workflow};
use sqlx::PgPool;
use uuid::Uuid;

/// The state a workflow of one current step in `step` is in, as DESIGN §10 words the rule.
fn expected(step: StepState) -> WorkflowState {
    match step {
        StepState::Cancelled => WorkflowState::Cancelled,
        StepState::ReviewRequired | StepState::Unsent | StepState::Rejected => {
            WorkflowState::NeedsReview
        }
        StepState::Succeeded | StepState::Waived => WorkflowState::Completed,
        StepState::Running | StepState::Invoking | StepState::OutcomeUnknown => {
            WorkflowState::Running
        }
        StepState::Blocked | StepState::Ready | StepState::Held => WorkflowState::Pending,
    }
}

/// A database where a step may be put in any state without the evidence each state requires
/// (a receipt, a waiver, a lease): this tests the rule, not the constraints. Its steps call the
/// adapter `proto`.
async fn without_evidence_checks(pool: &PgPool) {
    sqlx::raw_sql(
        "insert into adapter (name, base_url, contract, contract_version, declared)
             values ('proto', 'http://127.0.0.1:9', '{}', 1, '{}');
         alter table step drop constraint succeeded_step_has_receipt,
                          drop constraint waived_step_has_waiver,
                          drop constraint leased_step_has_lease,
                          drop constraint invoking_step_has_request_key,
                          drop constraint unknown_step_says_since_when",
    )
    .execute(pool)
    .await
    .unwrap();
}

/// A pending workflow with one step in `state`; returns the workflow and the step.
async fn workflow_with(pool: &PgPool, state: StepState) -> (Uuid, Uuid) {
    let (workflow, step) = (Uuid::now_v7(), Uuid::now_v7());
    sqlx::query(
        "insert into workflow (id, creation_key, definition_name, definition_version, input, input_digest)
         values ($1, $1::text, 'document_delivery', 1, '{}', 'sha256:' || repeat('0', 64))",
    )
    .bind(workflow)
    .execute(pool)
    .await
    .unwrap();
    add_step(pool, workflow, step, "deliver", state).await;
    (workflow, step)
}

async fn add_step(pool: &PgPool, workflow: Uuid, step: Uuid, logical: &str, state: StepState) {
    sqlx::query(
        "insert into step (id, workflow_id, logical, definition_version, kind, adapter, state, generation)
         values ($1, $2, $3, 1, 'external', 'proto', $4,
                 (select count(*) from step where workflow_id = $2))",
    )
    .bind(step)
    .bind(workflow)
    .bind(logical)
    .bind(state)
    .execute(pool)
    .await
    .unwrap();
}

async fn refreshed(pool: &PgPool, workflow: Uuid) -> WorkflowState {
    let mut conn = pool.acquire().await.unwrap();
    workflow::refresh_state(&mut conn, workflow).await.unwrap()
}

async fn announced(pool: &PgPool, workflow: Uuid) -> WorkflowState {
    let mut conn = pool.acquire().await.unwrap();
    conclusion::announce(&mut conn, &[], &[workflow], &[Uuid::now_v7()])
        .await
        .unwrap();
    workflow::by_id(pool, workflow)
        .await
        .unwrap()
        .unwrap()
        .state
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn every_step_state_makes_the_workflow_state_the_rule_names_on_both_paths(pool: PgPool) {
    without_evidence_checks(&pool).await;
    for state in StepState::ALL {
        let (one, _) = workflow_with(&pool, state).await;
        assert_eq!(refreshed(&pool, one).await, expected(state), "{state:?}");
        let (other, _) = workflow_with(&pool, state).await;
        assert_eq!(announced(&pool, other).await, expected(state), "{state:?}");
    }
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_change_of_state_is_announced_once_at_the_next_revision(pool: PgPool) {
    without_evidence_checks(&pool).await;
    let (id, _) = workflow_with(&pool, StepState::ReviewRequired).await;
    assert_eq!(refreshed(&pool, id).await, WorkflowState::NeedsReview);
    assert_eq!(refreshed(&pool, id).await, WorkflowState::NeedsReview);
    let events: Vec<(String, i64, serde_json::Value)> = sqlx::query_as(
        "select kind, revision, payload from outbox where workflow_id = $1 order by revision",
    )
    .bind(id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        events,
        // The row starts at revision 1 (its `workflow.started`, not written by this fixture).
        [(
            "workflow.state_changed".to_owned(),
            2,
            serde_json::json!({ "from": "pending", "to": "needs_review" })
        )]
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_replaced_step_counts_for_nothing_and_its_replacement_for_everything(pool: PgPool) {
    without_evidence_checks(&pool).await;
    let (id, old) = workflow_with(&pool, StepState::Cancelled).await;
    let new = Uuid::now_v7();
    add_step(&pool, id, new, "deliver", StepState::Succeeded).await;
    sqlx::query("update step set replaces_step_id = $1 where id = $2")
        .bind(old)
        .bind(new)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(refreshed(&pool, id).await, WorkflowState::Completed);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_open_incident_holds_a_completed_workflow_in_review_until_it_is_resolved(pool: PgPool) {
    without_evidence_checks(&pool).await;
    let (id, step) = workflow_with(&pool, StepState::Succeeded).await;
    let incident: Uuid = sqlx::query_scalar(
        "insert into integrity_incident (id, step_id, kind)
         values (gen_random_uuid(), $1, 'duplicate_effect') returning id",
    )
    .bind(step)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(refreshed(&pool, id).await, WorkflowState::NeedsReview);
    sqlx::query(
        "update integrity_incident set resolved_at = now(), resolved_by = 'ops',
                canonical_reference = 'ch_1', disposition = 'accepted_unresolved',
                resolution_reason = 'one charge kept' where id = $1",
    )
    .bind(incident)
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(announced(&pool, id).await, WorkflowState::Completed);
}
