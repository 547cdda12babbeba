//! Admission: a pure step that depends on nothing is settled in the transaction that starts its
//! workflow, with its event, and its dependants are ready at once; one whose output does not
//! render is left to a worker, which sends it to review.

use destinations::Kind;
use engine::intake::{NewWorkflow, Started, start_workflow};
use engine::store::journal::Actor;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::Harness;

/// A pure step over an optional field: with the field absent its output does not render.
const OPTIONAL_NOTE: &str = r#"
name: optional_note
version: 1
description: Renders a note from an optional field, then delivers it.
subject: "{{ input.recipient }}"
input_schema:
  type: object
  additionalProperties: false
  required: [recipient]
  properties:
    recipient: { type: string, minLength: 1 }
    note: { type: string }
status_step: deliver
steps:
  - name: render
    pure:
      output:
        note: "{{ input.note }}"
  - name: deliver
    depends_on: [render]
    requires: { render: [note] }
    external:
      adapter: docs
      request:
        recipient: "{{ input.recipient }}"
        summary: "{{ steps.render.note }}"
    words: { noun: Delivery, service: the delivery service }
"#;

async fn start(pool: &PgPool, definition: &str, input: Value) -> Uuid {
    let started = start_workflow(
        pool,
        NewWorkflow {
            creation_key: format!("{definition}-{input}"),
            definition: definition.to_owned(),
            version: None,
            input,
        },
        Actor::Api("test"),
    )
    .await
    .unwrap();
    let Started::Created(workflow) = started else {
        panic!("a new creation key starts a new workflow");
    };
    workflow.id
}

/// The workflow's outbox events: revision, kind and payload, in revision order.
async fn events(pool: &PgPool, workflow: Uuid) -> Vec<(i64, String, Value)> {
    sqlx::query_as(
        "select revision, kind, payload from outbox where workflow_id = $1 order by revision",
    )
    .bind(workflow)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// The payloads of `workflow`'s events, asserted to be its start, one step's success and the
/// state change, on revisions 1 to 3.
async fn opened_with_one_step(pool: &PgPool, workflow: Uuid) -> Vec<Value> {
    let events = events(pool, workflow).await;
    let kinds: Vec<(i64, &str)> = events.iter().map(|(r, k, _)| (*r, k.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (1, "workflow.started"),
            (2, "step.succeeded"),
            (3, "workflow.state_changed")
        ]
    );
    events.into_iter().map(|(_, _, payload)| payload).collect()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_pure_step_that_depends_on_nothing_is_settled_at_admission_with_its_event_and_its_dependant_ready(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 1_000, 0).await;

    let w = h.start("admitted").await;

    let (render, output): (Uuid, Value) =
        sqlx::query_as("select id, output from step where workflow_id = $1 and logical = 'render'")
            .bind(w)
            .fetch_one(&h.pool)
            .await
            .unwrap();
    let definition = engine::definition::Catalog::get(&h.pool, "document_delivery", 2)
        .await
        .unwrap();
    let input: Value = sqlx::query_scalar("select input from workflow where id = $1")
        .bind(w)
        .fetch_one(&h.pool)
        .await
        .unwrap();
    let expected = definition.run_pure("render", &input, &json!({})).unwrap();
    assert_eq!(output, expected, "the output a worker would have rendered");
    assert_eq!(h.step(w, "render").await, ("succeeded".to_owned(), 1));
    assert_eq!(h.step(w, "deliver").await, ("ready".to_owned(), 0));
    assert_eq!(h.step(w, "notify").await, ("blocked".to_owned(), 0));
    let queued: Vec<String> = sqlx::query_scalar(
        "select s.logical from step_ready q join step s on s.id = q.step_id where s.workflow_id = $1",
    )
    .bind(w)
    .fetch_all(&h.pool)
    .await
    .unwrap();
    assert_eq!(queued, ["deliver"], "only the dependant waits for a claim");
    assert_eq!(h.workflow_state(w).await, "running");
    let events = opened_with_one_step(&h.pool, w).await;
    assert_eq!(events[1], json!({ "step": render, "logical": "render" }));
    assert_eq!(events[2], json!({ "from": "pending", "to": "running" }));
    let revision: i64 = sqlx::query_scalar("select revision from workflow where id = $1")
        .bind(w)
        .fetch_one(&h.pool)
        .await
        .unwrap();
    assert_eq!(revision, 3, "the workflow's revision is its last event's");

    h.drive_until(w, "notify", "succeeded").await;
    assert_eq!(h.workflow_state(w).await, "completed");
    assert_eq!(
        h.step(w, "render").await,
        ("succeeded".to_owned(), 1),
        "never run again"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_pure_step_whose_output_does_not_render_at_admission_waits_for_a_worker_that_sends_it_to_review(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 1_000, 0).await;
    engine::definition::apply(
        &h.pool,
        OPTIONAL_NOTE,
        engine::store::journal::Actor::Engine("test"),
        engine::definition::ApplyOptions::default(),
    )
    .await
    .unwrap();

    let w = start(&h.pool, "optional_note", json!({ "recipient": "r-1" })).await;

    assert_eq!(h.step(w, "render").await, ("ready".to_owned(), 0));
    assert_eq!(h.step(w, "deliver").await, ("blocked".to_owned(), 0));
    assert_eq!(h.workflow_state(w).await, "pending");
    let kinds: Vec<String> = events(&h.pool, w)
        .await
        .into_iter()
        .map(|(_, k, _)| k)
        .collect();
    assert_eq!(kinds, ["workflow.started"]);

    h.drive_until(w, "render", "review_required").await;
    assert_eq!(h.step(w, "deliver").await, ("blocked".to_owned(), 0));
    assert!(h.ledger().await.deliveries.is_empty(), "nothing was sent");

    let noted = start(
        &h.pool,
        "optional_note",
        json!({ "recipient": "r-1", "note": "hi" }),
    )
    .await;
    assert_eq!(h.step(noted, "render").await, ("succeeded".to_owned(), 1));
    assert_eq!(h.step(noted, "deliver").await, ("ready".to_owned(), 0));
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_workflow_of_pure_steps_that_depend_on_nothing_is_completed_at_admission(pool: PgPool) {
    const DIGEST_ONLY: &str = r#"
name: digest_only
version: 1
description: Digests a document and sends nothing.
subject: "{{ input.title }}"
input_schema:
  type: object
  additionalProperties: false
  required: [title]
  properties:
    title: { type: string, minLength: 1 }
steps:
  - name: digest
    pure:
      output:
        digest: "{{ input.title | digest }}"
"#;
    engine::definition::apply(
        &pool,
        DIGEST_ONLY,
        engine::store::journal::Actor::Engine("test"),
        engine::definition::ApplyOptions::default(),
    )
    .await
    .unwrap();

    let w = start(&pool, "digest_only", json!({ "title": "t" })).await;

    let state: String = sqlx::query_scalar("select state::text from workflow where id = $1")
        .bind(w)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(state, "completed");
    let events = opened_with_one_step(&pool, w).await;
    assert_eq!(events[2], json!({ "from": "pending", "to": "completed" }));
    let queued: i64 = sqlx::query_scalar("select count(*) from step_ready")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(queued, 0, "nothing is left for a worker");
}
