//! An operator's hold on an adapter (docs/DESIGN.md §20): nothing new leaves for it from any
//! worker, its claimed steps wait held and uncounted, its lookups wait unless the hold lets them
//! go, and a resume releases the held steps oldest first at the ramp it names.

use std::time::Duration;

use destinations::Kind;
use engine::domain::Role;
use engine::recovery::ActionError;
use engine::recovery::hold::{hold_adapter, resume_adapter};
use engine::store::journal::Actor;
use sqlx::PgPool;

use crate::operate::unknown_delivery;
use crate::support::Harness;

const APPROVER: (Actor<'static>, Role) = (Actor::Operator("ana"), Role::Approver);

async fn audited(pool: &PgPool, action: &str) -> Vec<(String, Option<String>, serde_json::Value)> {
    sqlx::query_as("select actor, reason, details from audit where action = $1 order by id")
        .bind(action)
        .fetch_all(pool)
        .await
        .unwrap()
}

/// Makes every queued step due now, instead of waiting out its recheck.
async fn due_now(h: &Harness) {
    sqlx::query("update step_ready set run_after = now()")
        .execute(&h.pool)
        .await
        .unwrap();
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_held_adapter_sends_nothing_new_until_it_is_resumed(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    hold_adapter(
        &h.pool,
        APPROVER,
        "docs",
        "the provider reports elevated errors",
        true,
    )
    .await
    .unwrap();
    let (first, second) = (h.start("held-1").await, h.start("held-2").await);
    h.drive_until(second, "deliver", "held").await;
    h.drive_for(Duration::from_millis(300)).await;

    for w in [first, second] {
        assert_eq!(
            h.step(w, "deliver").await,
            ("held".to_owned(), 0),
            "held, no attempt"
        );
        assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 0);
    }
    assert!(
        h.ledger().await.deliveries.is_empty(),
        "the destination saw nothing"
    );

    let resumed = resume_adapter(&h.pool, APPROVER, "docs", "the provider recovered", None)
        .await
        .unwrap();
    assert_eq!(resumed.released, 2);
    for w in [first, second] {
        h.drive_until(w, "deliver", "succeeded").await;
        assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
    }
    let holds = audited(&h.pool, "adapter_hold").await;
    assert_eq!(holds.len(), 1);
    assert_eq!(holds[0].0, "ana");
    assert_eq!(
        holds[0].1.as_deref(),
        Some("the provider reports elevated errors")
    );
    let resumes = audited(&h.pool, "adapter_resume").await;
    assert_eq!(resumes[0].2["released"], 2);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn only_an_approver_holds_only_with_a_reason_and_never_twice(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let operator = (Actor::Operator("olga"), Role::Operator);
    let refused = hold_adapter(&h.pool, operator, "docs", "outage", true).await;
    assert!(
        matches!(refused, Err(ActionError::Forbidden(_))),
        "{refused:?}"
    );
    let blank = hold_adapter(&h.pool, APPROVER, "docs", "  ", true).await;
    assert!(matches!(blank, Err(ActionError::Invalid(_))), "{blank:?}");
    let unknown = hold_adapter(&h.pool, APPROVER, "mail", "outage", true).await;
    assert!(
        matches!(unknown, Err(ActionError::Invalid(_))),
        "{unknown:?}"
    );
    let not_held = resume_adapter(&h.pool, APPROVER, "docs", "back", None).await;
    assert!(
        matches!(not_held, Err(ActionError::Conflict(_))),
        "{not_held:?}"
    );

    hold_adapter(&h.pool, APPROVER, "docs", "outage", true)
        .await
        .unwrap();
    let again = hold_adapter(&h.pool, APPROVER, "docs", "outage again", true).await;
    let Err(ActionError::Conflict(sentence)) = again else {
        panic!("a second hold was not refused: {again:?}");
    };
    assert!(sentence.contains("held already, by ana"), "{sentence}");
    let ramp = resume_adapter(&h.pool, APPROVER, "docs", "back", Some(0.0)).await;
    assert!(matches!(ramp, Err(ActionError::Invalid(_))), "{ramp:?}");
    assert_eq!(audited(&h.pool, "adapter_hold").await.len(), 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_step_in_recovery_is_not_looked_up_while_its_adapter_holds_lookups(pool: PgPool) {
    let h = Harness::new(pool, Kind::Queryable, 300, 0).await;
    let (w, _) = unknown_delivery(&h, "held-lookup", "outcome_unknown").await;
    hold_adapter(&h.pool, APPROVER, "docs", "provider outage", true)
        .await
        .unwrap();
    due_now(&h).await;
    h.drive_for(Duration::from_millis(400)).await;

    assert_eq!(
        h.step(w, "deliver").await.0,
        "outcome_unknown",
        "no lookup, no review"
    );
    let lookups: i64 = sqlx::query_scalar("select count(*) from observation where kind = 'lookup'")
        .fetch_one(&h.pool)
        .await
        .unwrap();
    assert_eq!(lookups, 0);

    resume_adapter(&h.pool, APPROVER, "docs", "provider back", None)
        .await
        .unwrap();
    due_now(&h).await;
    h.drive_until(w, "deliver", "succeeded").await;
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_resume_releases_held_steps_oldest_first_at_its_ramp(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    hold_adapter(&h.pool, APPROVER, "docs", "outage", true)
        .await
        .unwrap();
    let mut started = Vec::new();
    for key in ["ramp-1", "ramp-2", "ramp-3"] {
        let w = h.start(key).await;
        h.drive_until(w, "deliver", "held").await;
        started.push(w);
    }
    let resumed = resume_adapter(&h.pool, APPROVER, "docs", "back", Some(2.0))
        .await
        .unwrap();
    assert_eq!(resumed.released, 3);
    let delays: Vec<f64> = sqlx::query_scalar(
        "select extract(epoch from q.run_after - min(q.run_after) over ())::float8
         from step_ready q join step s on s.id = q.step_id
         where s.logical = 'deliver' order by s.workflow_id",
    )
    .fetch_all(&h.pool)
    .await
    .unwrap();
    // Workflow ids are time-ordered: the first started was held first and goes first.
    let rounded: Vec<f64> = delays.iter().map(|d| (d * 10.0).round() / 10.0).collect();
    assert_eq!(rounded, [0.0, 0.5, 1.0], "{delays:?}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_hold_that_lets_lookups_go_still_resends_nothing(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 300, 0).await;
    let (w, _) = unknown_delivery(&h, "held-replay", "outcome_unknown").await;
    hold_adapter(&h.pool, APPROVER, "docs", "provider outage", false)
        .await
        .unwrap();
    due_now(&h).await;
    h.drive_for(Duration::from_millis(400)).await;

    assert_eq!(
        h.step(w, "deliver").await,
        ("outcome_unknown".to_owned(), 1),
        "no resend"
    );
    resume_adapter(&h.pool, APPROVER, "docs", "provider back", None)
        .await
        .unwrap();
    due_now(&h).await;
    h.drive_until(w, "deliver", "succeeded").await;
    assert_eq!(
        h.effects(&Harness::key(w, "deliver")).await,
        1,
        "one effect, replayed"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_step_claimed_before_a_hold_but_not_yet_sent_waits_held_uncounted(pool: PgPool) {
    use destinations::{Fault, FaultPlan, FaultRule, Match, Operation};
    use engine::adapter::registry::Adapters;
    use engine::worker::{StepReport, Worker};

    // One call at a time, so the second step of a batch waits for its checkpoint 3 while the
    // first is at the (slow) destination; the adapter is opaque: it sends after checkpoint 3.
    let h = Harness::new(pool, Kind::Opaque, 2_000, 0).await;
    let mut config = crate::support::worker_config("one-at-a-time");
    config.concurrency = 1;
    let worker = Worker::new(
        h.pool.clone(),
        config,
        Adapters::load(&h.pool).await.unwrap(),
    );
    let (slow, waiting) = (h.start("slow").await, h.start("waiting").await);
    h.faults(FaultPlan::rules([FaultRule::new(
        Operation::Deliver,
        Match::ClientReference(Harness::key(slow, "deliver")),
        Fault::DelayResponse { ms: 800 },
    )]));
    let pass = tokio::spawn(async move { worker.run_once().await.unwrap() });
    tokio::time::sleep(Duration::from_millis(300)).await;
    hold_adapter(&h.pool, APPROVER, "docs", "outage", true)
        .await
        .unwrap();
    let reports = pass.await.unwrap();

    assert!(
        reports.iter().any(|(_, r)| matches!(r, StepReport::Held)),
        "{reports:?}"
    );
    assert_eq!(h.step(waiting, "deliver").await, ("held".to_owned(), 0));
    assert_eq!(h.effects(&Harness::key(waiting, "deliver")).await, 0);
    assert_eq!(
        h.effects(&Harness::key(slow, "deliver")).await,
        1,
        "in flight, it finished"
    );

    resume_adapter(&h.pool, APPROVER, "docs", "back", None)
        .await
        .unwrap();
    h.drive_until(waiting, "deliver", "succeeded").await;
    assert_eq!(h.effects(&Harness::key(waiting, "deliver")).await, 1);
}
