//! Outbound limits (docs/DESIGN.md §20): an adapter's requests per second and calls in flight
//! hold across every worker on the database, as the destination's own ledger records them, and
//! only an approver overrides them.

use std::time::Duration;

use destinations::{Fault, FaultPlan, FaultRule, Kind, Match, Operation};
use engine::domain::{Limits, Role};
use engine::recovery::ActionError;
use engine::recovery::limit::limit_adapter;
use engine::store::journal::Actor;
use uuid::Uuid;

use crate::support::Harness;

const APPROVER: (Actor<'static>, Role) = (Actor::Operator("ana"), Role::Approver);

fn limits(requests_per_second: Option<f64>, in_flight: Option<u32>) -> Limits {
    Limits {
        requests_per_second,
        in_flight,
    }
}

/// Runs two workers on `h`'s database at once until every one of `workflows` completed (two
/// calls each: the delivery and the notice); returns when the destination accepted each call,
/// as its own ledger records it.
async fn two_workers_until_completed(
    h: &Harness,
    workflows: &[Uuid],
) -> Vec<chrono::DateTime<chrono::Utc>> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut running = Vec::new();
    for worker in [h.another_worker("w-a").await, h.another_worker("w-b").await] {
        let mut stopped = stopped.clone();
        running.push(tokio::spawn(worker.run(async move {
            let _ = stopped.wait_for(|s| *s).await;
        })));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    for &w in workflows {
        while h.workflow_state(w).await != "completed" {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the workflows never completed: {}",
                h.workflow_state(w).await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    stop.send(true).unwrap();
    for r in running {
        r.await.unwrap();
    }
    h.ledger()
        .await
        .deliveries
        .iter()
        .map(|d| d.accepted_at)
        .collect()
}

async fn start_many(h: &Harness, tag: &str, n: usize) -> Vec<Uuid> {
    let mut started = Vec::new();
    for i in 0..n {
        started.push(h.start(&format!("{tag}-{i}")).await);
    }
    started
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn no_second_at_the_destination_sees_more_than_the_rate_two_workers_share(
    pool: sqlx::PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    limit_adapter(
        &h.pool,
        APPROVER,
        "docs",
        limits(Some(4.0), None),
        "provider asks for 4/s",
        None,
    )
    .await
    .unwrap();
    let workflows = start_many(&h, "rate", 5).await;
    let accepted = two_workers_until_completed(&h, &workflows).await;
    assert_eq!(accepted.len(), 10, "each call made once");
    for (i, start) in accepted.iter().enumerate() {
        let within = accepted[i..]
            .iter()
            .take_while(|a| **a - *start < chrono::Duration::seconds(1))
            .count();
        assert!(
            within <= 4,
            "{within} deliveries within one second of {start}"
        );
    }
    let span = *accepted.last().unwrap() - accepted[0];
    assert!(
        span >= chrono::Duration::milliseconds(2_000),
        "ten calls at 4/s took {span}"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_in_flight_limit_of_one_sends_the_next_call_only_after_the_last_one_settled(
    pool: sqlx::PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 5_000, 0).await;
    limit_adapter(
        &h.pool,
        APPROVER,
        "docs",
        limits(None, Some(1)),
        "one at a time",
        None,
    )
    .await
    .unwrap();
    h.faults(FaultPlan::rules([FaultRule::new(
        Operation::Deliver,
        Match::Any,
        Fault::DelayResponse { ms: 300 },
    )
    .times(4)]));
    let workflows = start_many(&h, "flight", 2).await;
    let accepted = two_workers_until_completed(&h, &workflows).await;
    assert_eq!(accepted.len(), 4, "each call made once");
    for pair in accepted.windows(2) {
        assert!(
            pair[1] - pair[0] >= chrono::Duration::milliseconds(250),
            "two calls overlapped: {pair:?}"
        );
    }
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn only_an_approver_overrides_limits_with_a_reason_and_a_cleared_override_is_audited(
    pool: sqlx::PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let operator = (Actor::Operator("olga"), Role::Operator);
    let refused = limit_adapter(
        &h.pool,
        operator,
        "docs",
        limits(Some(1.0), None),
        "slow",
        None,
    )
    .await;
    assert!(
        matches!(refused, Err(ActionError::Forbidden(_))),
        "{refused:?}"
    );
    for bad in [
        limits(Some(0.0), None),
        limits(None, Some(0)),
        limits(Some(f64::INFINITY), None),
    ] {
        let invalid = limit_adapter(&h.pool, APPROVER, "docs", bad, "slow", None).await;
        assert!(
            matches!(invalid, Err(ActionError::Invalid(_))),
            "{invalid:?}"
        );
    }
    let unknown = limit_adapter(
        &h.pool,
        APPROVER,
        "mail",
        limits(Some(1.0), None),
        "slow",
        None,
    )
    .await;
    assert!(
        matches!(unknown, Err(ActionError::Invalid(_))),
        "{unknown:?}"
    );

    let set = limit_adapter(
        &h.pool,
        APPROVER,
        "docs",
        limits(Some(2.5), Some(3)),
        "their 429s",
        None,
    )
    .await
    .unwrap()
    .expect("an override in force");
    assert_eq!(
        (set.set_by.as_str(), set.limits.in_flight),
        ("ana", Some(3))
    );
    let cleared = limit_adapter(
        &h.pool,
        APPROVER,
        "docs",
        Limits::default(),
        "they are fine",
        None,
    )
    .await
    .unwrap();
    assert!(cleared.is_none());
    let audit: Vec<(String, Option<String>, serde_json::Value)> = sqlx::query_as(
        "select actor, reason, details from audit where action = 'adapter_limit' order by id",
    )
    .fetch_all(&h.pool)
    .await
    .unwrap();
    assert_eq!(audit.len(), 2);
    assert_eq!(audit[0].2["requests_per_second"], 2.5);
    assert_eq!(audit[1].2["cleared"], true);
    assert_eq!(audit[1].2["before"]["in_flight"], 3);
}
