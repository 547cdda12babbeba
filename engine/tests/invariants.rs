//! The semantic invariants find what they are for, once each, and nothing on healthy runs.

mod support;

use destinations::Kind;
use sqlx::PgPool;
use support::Harness;
use uuid::Uuid;

async fn step_id(pool: &PgPool, workflow: Uuid, logical: &str) -> Uuid {
    sqlx::query_scalar("select id from step where workflow_id = $1 and logical = $2")
        .bind(workflow)
        .bind(logical)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn add_attempt(pool: &PgPool, step: Uuid, number: i32, outcome: &str) {
    sqlx::query(
        "insert into attempt (id, step_id, number, worker, lease_expires_at, invoked_at, ended_at, outcome)
         values ($1, $2, $3, 'rogue', now(), now(), now(), $4::attempt_outcome)",
    )
    .bind(Uuid::now_v7())
    .bind(step)
    .bind(number)
    .bind(outcome)
    .execute(pool)
    .await
    .unwrap();
}

fn kinds(violations: &[engine::invariants::Violation]) -> Vec<&str> {
    violations.iter().map(|v| v.kind.as_str()).collect()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_healthy_run_violates_nothing(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let w = h.start("healthy").await;
    h.drive_until(w, "notify", "succeeded").await;
    assert_eq!(engine::invariants::check(&pool).await.unwrap(), vec![]);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_retry_under_an_opaque_adapter_without_authorization_is_found_and_recorded_once(
    pool: PgPool,
) {
    let h = Harness::new(pool.clone(), Kind::Opaque, 2_000, 0).await;
    let w = h.start("rogue-retry").await;
    let deliver = step_id(&pool, w, "deliver").await;
    add_attempt(&pool, deliver, 1, "outcome_unknown").await;
    add_attempt(&pool, deliver, 2, "succeeded").await;

    let found = engine::invariants::check(&pool).await.unwrap();
    assert!(
        kinds(&found).contains(&"opaque_retry_without_authorization"),
        "{found:?}"
    );
    engine::invariants::check(&pool).await.unwrap();
    let recorded: i64 = sqlx::query_scalar(
        "select count(*) from invariant_violation where kind = 'opaque_retry_without_authorization'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(recorded, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_step_with_two_external_references_is_found(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let w = h.start("two-refs").await;
    h.drive_until(w, "deliver", "succeeded").await;
    let deliver = step_id(&pool, w, "deliver").await;
    let mut tx = pool.begin().await.unwrap();
    engine::store::step::open_duplicate_incident(&mut tx, deliver, &[("x-999", None)])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let found = engine::invariants::check(&pool).await.unwrap();
    assert_eq!(
        kinds(&found),
        vec!["one_effect_step_with_several_references"]
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_dependant_started_before_its_required_receipt_is_found(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let w = h.start("early-notify").await;
    let notify = step_id(&pool, w, "notify").await;
    add_attempt(&pool, notify, 1, "succeeded").await;
    let found = engine::invariants::check(&pool).await.unwrap();
    assert!(
        kinds(&found).contains(&"dependant_started_before_required_receipt"),
        "{found:?}"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn before_resume_every_step_caught_mid_call_goes_to_recovery(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Opaque, 2_000, 0).await;
    let w = h.start("restored").await;
    h.drive_until(w, "deliver", "ready").await;
    // As a restore would leave it: invoking, an open attempt, a lease that has not expired.
    let deliver = step_id(&pool, w, "deliver").await;
    let key = Harness::key(w, "deliver");
    sqlx::query(
        "insert into external_request (request_key, step_id, input_digest, summary, adapter, contract_version, last_sent_at)
         values ($1, $2, 'sha256:' || repeat('a', 64), '{}', 'docs', 1, now())",
    )
    .bind(&key)
    .bind(deliver)
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "insert into attempt (id, step_id, number, worker, lease_expires_at, invoked_at) values ($1, $2, 1, 'gone', now() + interval '1 hour', now())",
    )
    .bind(Uuid::now_v7())
    .bind(deliver)
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "update step set state = 'invoking', request_key = $2, lease_holder = 'gone', lease_expires_at = now() + interval '1 hour', attempt_count = 1 where id = $1",
    )
    .bind(deliver)
    .bind(&key)
    .execute(&pool)
    .await
    .unwrap();

    assert_eq!(
        engine::invariants::prepare_resume(&pool).await.unwrap(),
        (1, 0)
    );
    assert_eq!(h.outcomes(w, "deliver").await, vec!["outcome_unknown"]);
    h.drive_until(w, "deliver", "review_required").await;
    assert_eq!(
        h.ledger().await.deliveries.len(),
        0,
        "recovery sent the request again"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_step_restored_mid_attempt_is_recovered_by_contract_never_rerun_blindly(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let w = h.start("restored-running").await;
    h.drive_until(w, "deliver", "ready").await;
    // As the backup saw it: leased, an attempt open, no request identity persisted yet.
    let deliver = step_id(&pool, w, "deliver").await;
    sqlx::query(
        "insert into attempt (id, step_id, number, worker, lease_expires_at) values ($1, $2, 1, 'gone', now() + interval '1 hour')",
    )
    .bind(Uuid::now_v7())
    .bind(deliver)
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "update step set state = 'running', lease_holder = 'gone', lease_expires_at = now() + interval '1 hour', attempt_count = 1 where id = $1",
    )
    .bind(deliver)
    .execute(&pool)
    .await
    .unwrap();

    assert_eq!(
        engine::invariants::prepare_resume(&pool).await.unwrap(),
        (1, 0)
    );
    assert_eq!(h.outcomes(w, "deliver").await, vec!["outcome_unknown"]);
    h.drive_until(w, "deliver", "succeeded").await;
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
}
