//! The checkpoint protocol and contract-driven recovery against real destination services,
//! asserted against what each destination's own ledger recorded.

use std::time::Duration;

use crate::support::{Harness, delay_deliver, fixture, once};
use destinations::{Fault, Kind, Match};
use engine::worker::StepReport;
use sqlx::PgPool;

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_document_is_rendered_delivered_and_notified_with_one_effect_each(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let w = h.start("happy").await;
    h.drive_until(w, "notify", "succeeded").await;

    assert_eq!(h.workflow_state(w).await, "completed");
    let (method, reference) = h.receipt(w, "deliver").await.unwrap();
    assert_eq!(method, "direct_response");
    let ledger = h.ledger().await;
    assert_eq!(
        ledger.deliveries.len(),
        2,
        "one delivery and one notification"
    );
    assert_eq!(ledger.deliveries[0].external_reference, reference);
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
    assert_eq!(h.outcomes(w, "deliver").await, vec!["succeeded"]);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_seeds_duplicate_scenario_under_an_idempotent_adapter_replays_the_same_key(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 500, 0).await;
    let w = h.start("dup-idempotent").await;
    let key = Harness::key(w, "deliver");
    h.faults(delay_deliver(Match::IdempotencyKey(key.clone()), 2_000));

    h.drive_until(w, "deliver", "succeeded").await;

    assert_eq!(
        h.outcomes(w, "deliver").await,
        vec!["outcome_unknown", "succeeded"]
    );
    assert_eq!(
        h.receipt(w, "deliver").await.unwrap().0,
        "idempotent_replay"
    );
    assert_eq!(
        h.effects(&key).await,
        1,
        "the destination recorded a second delivery"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_seeds_duplicate_scenario_under_a_queryable_adapter_is_verified_by_lookup(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Queryable, 500, 400).await;
    let w = h.start("dup-queryable").await;
    let key = Harness::key(w, "deliver");
    h.faults(delay_deliver(Match::ClientReference(key.clone()), 2_000));

    h.drive_until(w, "deliver", "succeeded").await;

    assert_eq!(
        h.outcomes(w, "deliver").await,
        vec!["outcome_unknown"],
        "no second attempt was made"
    );
    assert_eq!(h.receipt(w, "deliver").await.unwrap().0, "status_query");
    assert_eq!(h.effects(&key).await, 1);
    h.drive_until(w, "notify", "succeeded").await;
    assert_eq!(h.workflow_state(w).await, "completed");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_lookup_inside_the_visibility_window_waits_until_a_second_delivery_can_show(
    pool: PgPool,
) {
    let h = Harness::new(pool.clone(), Kind::Queryable, 2_000, 800).await;
    let w = h.start("predecessor").await;
    let key = Harness::key(w, "deliver");
    h.drive_until(w, "deliver", "ready").await;
    // An earlier system delivered the same document under this reference, long enough ago that
    // the status index shows it.
    let digest: String = sqlx::query_scalar(
        "select output ->> 'document_digest' from step where workflow_id = $1 and logical = 'render'",
    )
    .bind(w)
    .fetch_one(&pool)
    .await
    .unwrap();
    reqwest::Client::new()
        .post(format!("{}/deliveries", h.destination.base_url()))
        .json(&serde_json::json!({
            "client_reference": key, "digest": digest, "recipient": "r-1",
            "summary": "sent by the previous system",
        }))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(900)).await;
    // Z29C's own delivery is accepted, its answer lost: an unknown outcome, looked up at once.
    h.faults(once(Fault::DropResponse {}));

    h.drive_until(w, "deliver", "succeeded").await;

    assert_eq!(h.effects(&key).await, 2);
    let references: i64 = sqlx::query_scalar(
        "select count(*) from incident_reference r join integrity_incident i on i.id = r.incident_id
         join step s on s.id = i.step_id
         where s.workflow_id = $1 and s.logical = 'deliver' and i.resolved_at is null",
    )
    .bind(w)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        references, 2,
        "the receipt settled on the older delivery while the index could not show the new one yet"
    );
    assert_eq!(h.step(w, "notify").await.0, "blocked");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_seeds_duplicate_scenario_under_an_opaque_adapter_stops_for_review(pool: PgPool) {
    let h = Harness::new(pool, Kind::Opaque, 500, 0).await;
    let w = h.start("dup-opaque").await;
    let key = Harness::key(w, "deliver");
    h.faults(delay_deliver(Match::ClientReference(key.clone()), 2_000));

    h.drive_until(w, "deliver", "review_required").await;
    // Well past the delayed answer: nothing may call the destination again on its own.
    h.drive_for(Duration::from_millis(2_500)).await;

    assert_eq!(
        h.step(w, "deliver").await,
        ("review_required".to_owned(), 1)
    );
    assert_eq!(h.effects(&key).await, 1);
    assert_eq!(
        h.step(w, "notify").await.0,
        "blocked",
        "the dependant went ahead without a receipt"
    );
    assert_eq!(h.workflow_state(w).await, "needs_review");
    assert!(h.receipt(w, "deliver").await.is_none());
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_refusal_before_acceptance_is_failed_before_effect_and_retried_safely(pool: PgPool) {
    let h = Harness::new(pool, Kind::Opaque, 2_000, 0).await;
    let w = h.start("refused").await;
    h.faults(once(Fault::Refuse {}));
    h.drive_until(w, "deliver", "succeeded").await;
    assert_eq!(
        h.outcomes(w, "deliver").await,
        vec!["failed_before_effect", "succeeded"]
    );
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_durable_rejection_ends_the_step_rejected_without_another_attempt(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let w = h.start("rejected").await;
    h.faults(once(Fault::Reject {
        code: "recipient_unknown".into(),
        retryable: false,
    }));
    h.drive_until(w, "deliver", "rejected").await;
    h.drive_for(Duration::from_millis(200)).await;
    assert_eq!(h.outcomes(w, "deliver").await, vec!["rejected"]);
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 0);
    assert_eq!(h.workflow_state(w).await, "needs_review");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_retryable_rejection_is_tried_again(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let w = h.start("rate-limited").await;
    h.faults(once(Fault::Reject {
        code: "rate_limited".into(),
        retryable: true,
    }));
    h.drive_until(w, "deliver", "succeeded").await;
    assert_eq!(
        h.outcomes(w, "deliver").await,
        vec!["rejected", "succeeded"]
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_dropped_response_is_outcome_unknown_and_an_idempotent_replay_recovers_it(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let w = h.start("dropped").await;
    h.faults(once(Fault::DropResponse {}));
    h.drive_until(w, "deliver", "succeeded").await;
    assert_eq!(
        h.outcomes(w, "deliver").await,
        vec!["outcome_unknown", "succeeded"]
    );
    assert_eq!(
        h.receipt(w, "deliver").await.unwrap().0,
        "idempotent_replay"
    );
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_server_error_after_acceptance_is_outcome_unknown_never_failed(pool: PgPool) {
    let h = Harness::new(pool, Kind::Opaque, 2_000, 0).await;
    let w = h.start("five-hundred").await;
    h.faults(once(Fault::ErrorAfterAccept { status: 500 }));
    h.drive_until(w, "deliver", "review_required").await;
    assert_eq!(h.outcomes(w, "deliver").await, vec!["outcome_unknown"]);
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_unreachable_destination_is_failed_before_effect(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Opaque, 2_000, 0).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let contract = crate::support::declared("opaque", 2_000, 0, false);
    engine::adapter::apply::register_trusted(&pool, "docs", &format!("http://{closed}"), &contract)
        .await
        .unwrap();
    let worker = h.another_worker("worker-2").await;
    let w = h.start("unreachable").await;
    for _ in 0..3 {
        worker.run_once().await.unwrap();
    }
    let outcomes = h.outcomes(w, "deliver").await;
    assert!(!outcomes.is_empty());
    assert!(
        outcomes.iter().all(|o| o == "failed_before_effect"),
        "{outcomes:?}"
    );
    assert_eq!(h.ledger().await.deliveries.len(), 0);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_worker_that_lost_its_lease_during_the_call_changes_nothing(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 5_000, 0).await;
    let w = h.start("stale").await;
    h.drive_until(w, "deliver", "ready").await;
    let deliver = fixture::Step::named(&h.pool, w, "deliver").await;
    let mut accepted = h.destination.effects();
    h.faults(delay_deliver(Match::Any, 500));

    let worker = h.worker.clone();
    let pass = tokio::spawn(async move { worker.run_once().await.unwrap() });
    // The destination committed the delivery: the call is in flight. Another worker takes over.
    accepted.recv().await.unwrap();
    deliver
        .leased_to("worker-2", chrono::Duration::minutes(1))
        .await;
    let reports: Vec<StepReport> = pass.await.unwrap().into_iter().map(|(_, r)| r).collect();

    assert_eq!(reports, vec![StepReport::LeaseLost]);
    assert_eq!(h.step(w, "deliver").await.0, "invoking");
    assert_eq!(
        h.outcomes(w, "deliver").await,
        vec!["open"],
        "the stale worker ended the attempt"
    );
    assert!(
        h.receipt(w, "deliver").await.is_none(),
        "the stale worker wrote a receipt"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn two_workers_racing_for_one_step_make_one_attempt(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let second = h.another_worker("worker-2").await;
    let w = h.start("race").await;
    let (a, b) = tokio::join!(h.worker.run_once(), second.run_once());
    let mut claimed: Vec<uuid::Uuid> = a
        .unwrap()
        .into_iter()
        .chain(b.unwrap())
        .map(|(id, _)| id)
        .collect();
    let total = claimed.len();
    claimed.sort();
    claimed.dedup();
    // One may finish `render` before the other starts and then take `deliver`: never the same step.
    assert_eq!(claimed.len(), total, "two workers processed one step");
    // A pure step records no attempt of its own: it ran once.
    assert_eq!(h.step(w, "render").await, ("succeeded".to_owned(), 1));
}

/// Kills a worker once the destination has committed, before any answer, and lets the lease
/// expire: the step must be recovered by the adapter's contract, never simply run again.
async fn worker_vanishes_mid_call(kind: Kind, expected: &str, pool: PgPool) {
    let h = Harness::new(pool, kind, 2_000, 0).await;
    let w = h.start("vanished").await;
    h.drive_until(w, "deliver", "ready").await;
    let deliver = fixture::Step::named(&h.pool, w, "deliver").await;
    let mut accepted = h.destination.effects();
    h.faults(delay_deliver(Match::Any, 60_000));
    let worker = h.worker.clone();
    let pass = tokio::spawn(async move { worker.run_once().await });
    accepted.recv().await.unwrap();
    pass.abort();
    h.destination.clear_faults();
    deliver.lease_expired().await;

    h.drive_until(w, "deliver", expected).await;
    assert_eq!(h.outcomes(w, "deliver").await[0], "outcome_unknown");
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_worker_killed_mid_call_under_an_idempotent_adapter_is_recovered_by_replay(pool: PgPool) {
    worker_vanishes_mid_call(Kind::Idempotent, "succeeded", pool).await;
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_worker_killed_mid_call_under_a_queryable_adapter_is_recovered_by_lookup(pool: PgPool) {
    worker_vanishes_mid_call(Kind::Queryable, "succeeded", pool).await;
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_worker_killed_mid_call_under_an_opaque_adapter_leaves_the_step_for_review(pool: PgPool) {
    worker_vanishes_mid_call(Kind::Opaque, "review_required", pool).await;
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn suspended_authority_stops_the_step_before_any_call(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    fixture::suspend_authority(&pool, "adapter", "docs", "contract under review").await;
    let w = h.start("suspended").await;
    // Nothing was sent: the step says so, it is not an outcome to review.
    h.drive_until(w, "deliver", "unsent").await;
    assert_eq!(h.outcomes(w, "deliver").await, vec!["failed_before_effect"]);
    assert_eq!(h.ledger().await.deliveries.len(), 0);
    let (granted, reason): (bool, String) = sqlx::query_as(
        "select (authority ->> 'granted')::bool, authority ->> 'reason' from attempt_start
             order by started_at desc limit 1",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(!granted);
    assert!(reason.contains("contract under review"), "{reason}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_workflow_keeps_the_definition_version_it_started_with(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let started = engine::intake::start_workflow(
        &pool,
        engine::intake::NewWorkflow {
            creation_key: "v1-workflow".into(),
            definition: "document_delivery".into(),
            version: Some(1),
            input: serde_json::json!({"adapter": "docs", "recipient": "r-1", "document": {"title": "Old", "body": "b"}}),
        },
        engine::store::journal::Actor::Api("test"),
    )
    .await
    .unwrap();
    let engine::intake::Started::Created(workflow) = started else {
        panic!("not created")
    };
    h.drive_until(workflow.id, "deliver", "succeeded").await;
    let (key, summary): (String, serde_json::Value) = sqlx::query_as(
        "select request_key, summary from external_request where request_key like '%/deliver-v1'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(key.ends_with("/deliver-v1"), "{key}");
    assert!(
        !summary["body"]["json"]["summary"]
            .as_str()
            .unwrap()
            .contains("v2"),
        "{summary}"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_regenerated_request_that_differs_from_its_bound_bytes_is_never_sent(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let w = h.start("diverged").await;
    h.drive_until(w, "deliver", "ready").await;
    // As if older code had bound other bytes to this key before a crash.
    fixture::Step::named(&pool, w, "deliver")
        .await
        .bound_by_a_previous_system(&Harness::key(w, "deliver"))
        .await;
    h.drive_until(w, "deliver", "review_required").await;
    assert_eq!(h.outcomes(w, "deliver").await, vec!["failed_before_effect"]);
    assert_eq!(
        h.ledger().await.deliveries.len(),
        0,
        "bytes were sent under a key bound to others"
    );
}
