//! The set-based pipeline (docs/DESIGN.md §4): many steps per transaction, and the promises
//! that must hold anyway — one bad row never takes its batch down nor loses what a call
//! observed, and revisions stay gapless when one transaction announces several events of one
//! workflow.

use std::sync::Arc;

use crate::operate::person;
use crate::support::{Harness, worker_config};
use destinations::Kind;
use engine::adapter::registry::Adapters;
use engine::adapter::{
    Adapter, BoxFuture, LookupObservation, PrepareError, PreparedRequest, WithdrawalObservation,
};
use engine::domain::{InputDigest, RequestKey, Role, SideEffectContract, TransportObservation};
use engine::worker::{StepReport, Worker};
use sqlx::PgPool;
use uuid::Uuid;

/// The real destination's adapter, except that for one request key it reports an external
/// reference PostgreSQL cannot store (a NUL character), after the destination accepted it.
struct Poisoned {
    inner: Arc<dyn Adapter>,
    key: String,
}

impl Adapter for Poisoned {
    fn contract(&self) -> &SideEffectContract {
        self.inner.contract()
    }

    fn prepare(
        &self,
        key: &RequestKey,
        request: &serde_json::Value,
        content_digest: &InputDigest,
    ) -> Result<PreparedRequest, PrepareError> {
        self.inner.prepare(key, request, content_digest)
    }

    fn prepare_withdrawal(
        &self,
        key: &RequestKey,
        external_reference: &str,
    ) -> Result<PreparedRequest, PrepareError> {
        self.inner.prepare_withdrawal(key, external_reference)
    }

    fn deliver<'a>(
        &'a self,
        key: &'a RequestKey,
        request: &'a PreparedRequest,
    ) -> BoxFuture<'a, TransportObservation> {
        Box::pin(async move {
            let observed = self.inner.deliver(key, request).await;
            match observed {
                TransportObservation::Accepted {
                    status,
                    replayed,
                    fields,
                    ..
                } if key.as_str() == self.key => TransportObservation::Accepted {
                    status,
                    external_reference: "x-\u{0}-poisoned".to_owned(),
                    replayed,
                    fields,
                },
                other => other,
            }
        })
    }

    fn lookup<'a>(
        &'a self,
        key: &'a RequestKey,
        digest: &'a str,
        request: &'a serde_json::Value,
    ) -> BoxFuture<'a, LookupObservation> {
        self.inner.lookup(key, digest, request)
    }

    fn withdraw<'a>(
        &'a self,
        key: &'a RequestKey,
        external_reference: &'a str,
    ) -> BoxFuture<'a, WithdrawalObservation> {
        self.inner.withdraw(key, external_reference)
    }
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_row_the_database_refuses_settles_alone_and_the_rest_of_its_batch_commits(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let workflows: Vec<Uuid> = [h.start("a").await, h.start("b").await, h.start("c").await].into();
    // Every `render` settled at admission: the three deliveries are due together, one batch.
    let poisoned_key = Harness::key(workflows[1], "deliver");
    let (real, version) = Adapters::load(&pool).await.unwrap().get("docs").unwrap();
    let mut adapters = Adapters::default();
    let poisoned = Poisoned {
        inner: real,
        key: poisoned_key.clone(),
    };
    adapters.insert("docs".into(), Arc::new(poisoned), version);
    let worker = Worker::new(pool.clone(), worker_config("poisoned"), adapters);

    let reports = worker.run_once().await.unwrap();

    assert_eq!(reports.len(), 3, "the three deliveries were one batch");
    let settled = reports
        .iter()
        .filter(|(_, r)| matches!(r, StepReport::Settled { .. }))
        .count();
    assert_eq!(settled, 2, "{reports:?}");
    assert!(
        reports
            .iter()
            .any(|(_, r)| matches!(r, StepReport::Stopped { .. })),
        "{reports:?}"
    );
    for w in [workflows[0], workflows[2]] {
        assert_eq!(h.step(w, "deliver").await.0, "succeeded");
        assert!(h.receipt(w, "deliver").await.is_some());
    }
    // The refused step keeps its lease until it expires, and what the destination answered is
    // on its timeline all the same.
    assert_eq!(h.step(workflows[1], "deliver").await.0, "invoking");
    assert!(h.receipt(workflows[1], "deliver").await.is_none());
    let kept: Vec<serde_json::Value> = sqlx::query_scalar(
        "select o.body from observation o join step s on s.id = o.step_id
         where s.workflow_id = $1 and s.logical = 'deliver' and o.kind = 'transport'",
    )
    .bind(workflows[1])
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let body = kept[0].to_string();
    assert!(body.contains("poisoned"), "{body}");
    assert_eq!(kept[0]["late"], false, "{body}");
    assert_eq!(h.effects(&poisoned_key).await, 1);

    // Its batch's lease outlives the batch: the sweeper finds a step only through its lease.
    let held: bool = sqlx::query_scalar(
        "select exists (select 1 from step s join lease l on l.id = s.lease_id
                        where s.workflow_id = $1 and s.logical = 'deliver')",
    )
    .bind(workflows[1])
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(held, "the refused step's lease was dropped with its batch");
    // Once it expires, the sweeper sends the step to recovery, which replays the same key.
    sqlx::query("update lease set expires_at = now() - interval '1 second'")
        .execute(&pool)
        .await
        .unwrap();
    h.drive_until(workflows[1], "deliver", "succeeded").await;
    assert_eq!(h.effects(&poisoned_key).await, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn revisions_stay_gapless_and_ordered_when_one_transaction_announces_several_events(
    pool: PgPool,
) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let workflows = [h.start("one").await, h.start("two").await];
    for w in workflows {
        h.drive_until(w, "notify", "succeeded").await;
    }
    for w in workflows {
        let rows: Vec<(i64, String, String)> = sqlx::query_as(
            "select revision, kind, xmin::text from outbox where workflow_id = $1 order by id",
        )
        .bind(w)
        .fetch_all(&pool)
        .await
        .unwrap();
        let revisions: Vec<i64> = rows.iter().map(|(r, _, _)| *r).collect();
        let expected: Vec<i64> = (1..=i64::try_from(rows.len()).unwrap()).collect();
        assert_eq!(revisions, expected, "{rows:?}");
        let current: i64 = sqlx::query_scalar("select revision from workflow where id = $1")
            .bind(w)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(current, *revisions.last().unwrap());
        // The admission announced the start, `render`'s success and the state change in one
        // transaction; a worker's flush, `notify`'s attempt and the completion in another.
        let kinds_of = |at: &[(i64, String, String)]| -> Vec<String> {
            assert!(
                at.iter().all(|r| r.2 == at[0].2),
                "one transaction: {rows:?}"
            );
            at.iter().map(|r| r.1.clone()).collect()
        };
        assert_eq!(
            kinds_of(&rows[..3]),
            [
                "workflow.started",
                "step.succeeded",
                "workflow.state_changed"
            ]
        );
        assert_eq!(
            kinds_of(&rows[rows.len() - 2..]),
            ["step.attempt_ended", "workflow.state_changed"]
        );
    }
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_batch_claimed_under_an_opaque_contract_and_never_sent_is_sent_once_not_reviewed(
    pool: PgPool,
) {
    let h = Harness::new(pool.clone(), Kind::Opaque, 2_000, 0).await;
    let w = h.start("claimed-then-lost").await;
    h.drive_until(w, "deliver", "ready").await;
    // A worker claims the step and dies before its checkpoint 3: the claim committed, no call
    // was made.
    let claimed: (String, bool) = sqlx::query_as(
        "with due as (select id from step where workflow_id = $1 and logical = 'deliver'),
              leased as (insert into lease (id, holder, expires_at, steps)
                         select gen_random_uuid(), 'gone#00000000', now() - interval '1 second', array_agg(id) from due
                         returning id)
         update step set state = 'running', lease_holder = 'gone#00000000', lease_id = (select id from leased)
         where id in (select id from due)
         returning state::text, exists (select 1 from attempt_start a where a.step_id = step.id)",
    )
    .bind(w)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(claimed, ("running".to_owned(), false));
    sqlx::query("delete from step_ready")
        .execute(&pool)
        .await
        .unwrap();

    h.drive_until(w, "deliver", "succeeded").await;

    assert_eq!(h.outcomes(w, "deliver").await, vec!["succeeded"]);
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_step_holding_a_lease_that_does_not_exist_is_reported_as_an_orphan(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let w = h.start("stranded").await;
    assert!(
        engine::store::invariant::orphans(&pool)
            .await
            .unwrap()
            .is_empty()
    );
    let stranded: Uuid = sqlx::query_scalar(
        "update step set lease_id = gen_random_uuid(), lease_holder = 'gone#00000000'
         where workflow_id = $1 and logical = 'render' returning id",
    )
    .bind(w)
    .fetch_one(&pool)
    .await
    .unwrap();

    let orphans = engine::store::invariant::orphans(&pool).await.unwrap();

    assert_eq!(
        orphans,
        vec![("step.lease_id -> lease".to_owned(), 1, stranded.to_string())]
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn claims_at_once_take_disjoint_steps_oldest_first_and_none_locks_beyond_its_batch(
    pool: PgPool,
) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let mut workflows = Vec::new();
    for name in ["a", "b", "c", "d", "e"] {
        workflows.push(h.start(name).await);
    }
    // A queue row whose step has moved on sits at the head of the queue (as a restored backup
    // may hold one): a hint, skipped.
    sqlx::query("update step set state = 'cancelled' where workflow_id = $1")
        .bind(workflows[0])
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(
        "insert into step_ready (step_id, run_after)
         select id, now() - interval '1 hour' from step where workflow_id = $1",
    )
    .bind(workflows[0])
    .execute(&pool)
    .await
    .unwrap();
    let claimed = |due: Vec<engine::store::batch::Due>| -> Vec<Uuid> {
        due.iter().map(|d| d.step.workflow_id).collect()
    };

    let mut first = pool.begin().await.unwrap();
    let a = claimed(
        engine::store::batch::claim_due(&mut first, 2)
            .await
            .unwrap(),
    );
    let mut second = pool.begin().await.unwrap();
    let b = claimed(
        engine::store::batch::claim_due(&mut second, 10)
            .await
            .unwrap(),
    );

    assert_eq!(a, workflows[1..3], "the two oldest claimable steps");
    assert_eq!(b, workflows[3..5], "the rest, none of the first claim's");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_step_cancelled_while_ready_leaves_the_claim_queue_with_its_cancel(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let w = h.start("cancelled-ready").await;
    h.drive_until(w, "render", "succeeded").await;
    let queued = || async {
        sqlx::query_scalar::<_, String>(
            "select s.logical from step_ready q join step s on s.id = q.step_id
             where s.workflow_id = $1 order by 1",
        )
        .bind(w)
        .fetch_all(&pool)
        .await
        .unwrap()
    };
    assert_eq!(queued().await, ["deliver"]);
    let approver = person("queue-test", Role::Approver);

    engine::recovery::cancel::cancel_workflow(&pool, &approver, w, "the order was withdrawn")
        .await
        .unwrap();

    assert_eq!(h.step(w, "deliver").await.0, "cancelled");
    // Every later claim would otherwise walk past it, oldest first, for as long as it stays.
    assert!(queued().await.is_empty());
}

/// How many scans of the common table expression `cte` an `explain (format json)` plan holds,
/// and how many nested loops have one among their children (run once per outer row).
fn nested_loops_over(plan: &serde_json::Value, cte: &str) -> (usize, usize) {
    let (mut scans, mut looped) = (0, 0);
    let mut nodes = vec![&plan[0]["Plan"]];
    while let Some(node) = nodes.pop() {
        let children: Vec<&serde_json::Value> =
            node["Plans"].as_array().into_iter().flatten().collect();
        let scans_cte =
            |n: &serde_json::Value| n["Node Type"] == "CTE Scan" && n["CTE Name"] == cte;
        scans += children.iter().filter(|c| scans_cte(c)).count();
        if node["Node Type"] == "Nested Loop" && children.iter().any(|c| scans_cte(c)) {
            looped += 1;
        }
        nodes.extend(children);
    }
    (scans, looped)
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_flush_finds_the_receipts_it_wrote_by_a_hashed_set_not_a_scan_per_step(pool: PgPool) {
    // The settle statement as the engine runs it, with a flush of 64 accepted results.
    let source = include_str!("../../src/store/conclusion.rs");
    let start = source.find("r#\"with r as (").unwrap() + 3;
    let sql = &source[start..start + source[start..].find("\"#").unwrap()];
    let results: Vec<serde_json::Value> = (0..64)
        .map(|i| {
            serde_json::json!({
                "step": Uuid::now_v7(), "lease": Uuid::now_v7(), "expected": "invoking",
                "attempt": Uuid::now_v7(), "request_key": format!("k-{i}"), "outcome": "succeeded",
                "observation": {}, "receipt_id": Uuid::now_v7(), "external_reference": "x",
                "method": "direct_response", "completion_state": "accepted", "summary": {},
                "next": "succeeded", "delay_ms": 0,
            })
        })
        .collect();
    let sql = sql.replace("$1", "'worker'").replace(
        "$2",
        &format!("'{}'::jsonb", serde_json::Value::Array(results)),
    );

    let plan: serde_json::Value = sqlx::query_scalar(&format!("explain (format json) {sql}"))
        .fetch_one(&pool)
        .await
        .unwrap();

    let (scans, looped) = nested_loops_over(&plan, "receipted");
    assert!(scans > 0, "the plan reads the receipts it wrote: {plan}");
    assert_eq!(looped, 0, "a nested loop scans them once per step: {plan}");
}
