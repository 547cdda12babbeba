//! The status projection kept where the change is made: admission records it, and a worker's
//! flush keeps it current in its own transaction, so the status consumer finds it current and
//! has nothing to project. Whatever the flush cannot vouch for stays the consumer's.

use destinations::Kind;
use engine::definition::Catalog;
use engine::domain::words::sentences_by_state;
use engine::outbox::consumer::Consumer;
use engine::outbox::projections::NotificationCandidates;
use engine::outbox::publisher::Publisher;
use engine::store::projection::{KeptStatus, keep_statuses};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::{Harness, events};

/// The status row of `workflow`: revision, state and sentence.
async fn kept(pool: &PgPool, workflow: Uuid) -> (i64, String, String) {
    sqlx::query_as(
        "select revision, state::text, sentence from status_projection where workflow_id = $1",
    )
    .bind(workflow)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// What projecting `workflow` from durable state says now.
async fn truth(pool: &PgPool, workflow: Uuid) -> (i64, String, String) {
    let status = engine::read::status::project(pool, workflow)
        .await
        .unwrap()
        .unwrap();
    let state = serde_json::to_value(status.state).unwrap();
    (
        status.revision,
        state.as_str().unwrap().to_owned(),
        status.status,
    )
}

/// Whether any outbox event has reached the status consumer.
async fn published(pool: &PgPool) -> bool {
    sqlx::query_scalar("select exists (select 1 from outbox_cursor where reader = 'status')")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn admission_records_the_status_projection_a_projection_from_durable_state_would_make(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let w = h.start("admitted").await;
    let status = kept(&h.pool, w).await;
    assert_eq!(status, truth(&h.pool, w).await);
    assert_eq!(
        status,
        (
            3,
            "running".to_owned(),
            "Request recorded; delivery has not started".to_owned()
        )
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_flush_keeps_the_status_projection_current_without_its_consumer(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let w = h.start("kept").await;

    h.drive_until(w, "deliver", "succeeded").await;
    let (_, reference) = h.receipt(w, "deliver").await.unwrap();
    let status = kept(&h.pool, w).await;
    assert_eq!(status, truth(&h.pool, w).await);
    assert_eq!(
        status.2,
        format!("Delivery verified from external reference {reference}")
    );

    h.drive_until(w, "notify", "succeeded").await;
    let status = kept(&h.pool, w).await;
    assert_eq!(status, truth(&h.pool, w).await);
    assert_eq!(status.1, "completed");
    assert!(!published(&h.pool).await, "no consumer ran");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_projection_behind_its_workflow_is_left_to_the_status_consumer(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let w = h.start("behind").await;
    // As if the projection had taken only the first event.
    sqlx::query("update status_projection set revision = 1 where workflow_id = $1")
        .bind(w)
        .execute(&h.pool)
        .await
        .unwrap();
    h.drive_until(w, "notify", "succeeded").await;
    let left = kept(&h.pool, w).await;
    assert_eq!(
        left,
        (
            1,
            "running".to_owned(),
            "Request recorded; delivery has not started".to_owned()
        ),
        "a flush wrote over a projection it could not vouch for"
    );

    Publisher::new(h.pool.clone(), engine::outbox::consumers(None))
        .drain()
        .await
        .unwrap();
    let status = kept(&h.pool, w).await;
    assert_eq!(status, truth(&h.pool, w).await);
    assert_eq!(status.1, "completed");
}

/// What a flush that settled another step of `workflow` (none of its status step) would keep.
async fn another_step_settled(pool: &PgPool, workflow: Uuid) -> u64 {
    let definition = Catalog::get(pool, "document_delivery", 1).await.unwrap();
    let revision: i64 = sqlx::query_scalar("select revision from workflow where id = $1")
        .bind(workflow)
        .fetch_one(pool)
        .await
        .unwrap();
    let kept = KeptStatus {
        workflow,
        before: revision,
        status_step: "deliver".to_owned(),
        sentences: sentences_by_state(&definition.words("deliver")),
        settled: None,
    };
    keep_statuses(&mut pool.acquire().await.unwrap(), &[kept])
        .await
        .unwrap()
}

async fn deliver_step(pool: &PgPool, workflow: Uuid) -> Uuid {
    sqlx::query_scalar("select id from step where workflow_id = $1 and logical = 'deliver'")
        .bind(workflow)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_status_step_claimed_since_its_projection_is_said_in_flight_when_another_step_settles(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let w = h.start("claimed").await;
    // A claim moves the step without an event: the projection still says it has not started.
    sqlx::query(
        "update step set state = 'invoking', lease_holder = 'elsewhere', lease_id = $2 where id = $1",
    )
    .bind(deliver_step(&h.pool, w).await)
    .bind(Uuid::now_v7())
        .execute(&h.pool)
        .await
        .unwrap();
    assert_eq!(another_step_settled(&h.pool, w).await, 1);
    let status = kept(&h.pool, w).await;
    assert_eq!(status, truth(&h.pool, w).await);
    assert_eq!(status.2, "Waiting for the delivery service");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_status_step_with_a_duplicate_effect_incident_is_left_to_the_status_consumer(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let w = h.start("duplicated").await;
    let before = kept(&h.pool, w).await;
    sqlx::query(
        "insert into integrity_incident (id, step_id, kind) values ($1, $2, 'duplicate_effect')",
    )
    .bind(Uuid::now_v7())
    .bind(deliver_step(&h.pool, w).await)
    .execute(&h.pool)
    .await
    .unwrap();
    assert_eq!(another_step_settled(&h.pool, w).await, 0);
    assert_eq!(kept(&h.pool, w).await, before);
    assert_ne!(
        before.2,
        truth(&h.pool, w).await.2,
        "the incident changes the sentence"
    );
}

/// `workflow`'s notification candidates: (state, sentence).
async fn told(pool: &PgPool, workflow: Uuid) -> Vec<(String, String)> {
    sqlx::query_as(
        "select state::text, sentence from notification_candidate where workflow_id = $1",
    )
    .bind(workflow)
    .fetch_all(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_notification_consumer_says_what_a_current_status_row_says_and_projects_a_stale_one(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let (current, stale) = (h.start("current").await, h.start("stale").await);
    h.drive_until(current, "notify", "succeeded").await;
    h.drive_until(stale, "notify", "succeeded").await;
    // Marked rows: the one still current must be read as it is, the one behind must not be.
    sqlx::query("update status_projection set sentence = 'as the row says' where workflow_id = $1")
        .bind(current)
        .execute(&h.pool)
        .await
        .unwrap();
    sqlx::query(
        "update status_projection set sentence = 'behind', revision = revision - 1
         where workflow_id = $1",
    )
    .bind(stale)
    .execute(&h.pool)
    .await
    .unwrap();

    let mut batch = events(&h.pool, current).await;
    batch.extend(events(&h.pool, stale).await);
    let mut tx = h.pool.begin().await.unwrap();
    NotificationCandidates
        .handle_batch(&mut tx, &batch)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    assert_eq!(
        told(&h.pool, current).await,
        [("completed".to_owned(), "as the row says".to_owned())]
    );
    assert_eq!(
        told(&h.pool, stale).await,
        [("completed".to_owned(), truth(&h.pool, stale).await.2)]
    );
}
