use std::time::{Duration, Instant};

use destinations::protocol::{Problem, code};
use destinations::{
    Effect, Fault, FaultKind, FaultPlan, FaultReport, FaultRule, FaultSource, Kind, MIGRATOR,
    Match, Operation, RandomFaults,
};
use serde_json::json;
use sqlx::PgPool;

use crate::client::{Client, Reply, delivery, start};

fn every_delivery(fault: Fault) -> FaultPlan {
    FaultPlan::rules([FaultRule::new(Operation::Deliver, Match::Any, fault)])
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_dropped_response_closes_the_connection_after_the_delivery_was_committed(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Opaque).await;
    destination
        .set_faults(every_delivery(Fault::DropResponse {}))
        .unwrap();

    let reply = client
        .deliver(None, &delivery("w-40/deliver-v1", "letter"))
        .await;

    assert!(matches!(reply, Reply::ClosedWithoutResponse), "{reply:?}");
    let ledger = destination.ledger().await.unwrap();
    assert_eq!(ledger.deliveries_for("w-40/deliver-v1").count(), 1);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_delayed_response_arrives_late_after_the_delivery_was_committed(pool: PgPool) {
    const DELAY: Duration = Duration::from_millis(1500);
    let (destination, client) = start(pool, Kind::Idempotent).await;
    let ms = u64::try_from(DELAY.as_millis()).unwrap();
    destination
        .set_faults(every_delivery(Fault::DelayResponse { ms }))
        .unwrap();
    let mut effects = destination.effects();

    let sent = Instant::now();
    let answer = tokio::spawn(async move {
        let request = delivery("w-41/deliver-v1", "letter");
        let reply = client.deliver(Some("w-41/deliver-v1"), &request).await;
        (reply, sent.elapsed())
    });
    let Effect::Delivered {
        external_reference, ..
    } = effects.recv().await.unwrap()
    else {
        panic!("expected a delivery");
    };
    let ledger = destination.ledger().await.unwrap();
    let still_waiting = !answer.is_finished();
    let (reply, elapsed) = answer.await.unwrap();

    assert_eq!(ledger.deliveries[0].external_reference, external_reference);
    assert!(still_waiting, "the answer came before the ledger was read");
    let response = reply.response();
    assert_eq!(response.status, 201);
    assert!(elapsed >= DELAY, "answered after {elapsed:?}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_error_after_accept_answers_500_and_promises_nothing(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Opaque).await;
    destination
        .set_faults(every_delivery(Fault::ErrorAfterAccept { status: 500 }))
        .unwrap();

    let answer = client
        .deliver(None, &delivery("w-42/deliver-v1", "letter"))
        .await
        .response();

    assert_eq!(answer.status, 500);
    assert_eq!(answer.code(), code::INTERNAL_ERROR);
    assert!(answer.body.get("accepted").is_none(), "{}", answer.body);
    assert_eq!(destination.ledger().await.unwrap().deliveries.len(), 1);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_refusal_answers_503_and_commits_nothing(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Idempotent).await;
    destination
        .set_faults(every_delivery(Fault::Refuse {}))
        .unwrap();

    let answer = client
        .deliver(Some("k"), &delivery("w-43/deliver-v1", "letter"))
        .await
        .response();

    assert_eq!(answer.status, 503);
    let problem: Problem = answer.json();
    assert_eq!(problem.code, code::UNAVAILABLE);
    assert_eq!(
        (problem.retryable, problem.accepted),
        (Some(true), Some(false))
    );
    assert!(destination.ledger().await.unwrap().deliveries.is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_scripted_rejection_answers_422_and_commits_nothing(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Queryable).await;
    let reject = Fault::Reject {
        code: "recipient_unknown".into(),
        retryable: false,
    };
    destination.set_faults(every_delivery(reject)).unwrap();

    let answer = client
        .deliver(None, &delivery("w-44/deliver-v1", "letter"))
        .await
        .response();

    assert_eq!(answer.status, 422);
    let problem: Problem = answer.json();
    assert_eq!(problem.code, "recipient_unknown");
    assert_eq!(
        (problem.retryable, problem.accepted),
        (Some(false), Some(false))
    );
    assert!(destination.ledger().await.unwrap().deliveries.is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_rule_fires_only_as_many_times_as_it_says(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Idempotent).await;
    let refuse_twice = FaultRule::new(Operation::Deliver, Match::Any, Fault::Refuse {}).times(2);
    destination
        .set_faults(FaultPlan::rules([refuse_twice]))
        .unwrap();
    let request = delivery("w-45/deliver-v1", "letter");

    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(
            client
                .deliver(Some("w-45/deliver-v1"), &request)
                .await
                .response()
                .status,
        );
    }

    assert_eq!(statuses, [503, 503, 201]);
    assert_eq!(destination.fault_report().rules[0].fired, 2);
    assert_eq!(destination.ledger().await.unwrap().deliveries.len(), 1);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_rule_matching_a_key_spares_other_keys(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Idempotent).await;
    let rule = FaultRule::new(
        Operation::Deliver,
        Match::IdempotencyKey("w-46/deliver-v1".into()),
        Fault::DropResponse {},
    );
    destination.set_faults(FaultPlan::rules([rule])).unwrap();

    let spared = client
        .deliver(Some("w-47/deliver-v1"), &delivery("w-47/deliver-v1", "a"))
        .await;
    let dropped = client
        .deliver(Some("w-46/deliver-v1"), &delivery("w-46/deliver-v1", "b"))
        .await;

    assert_eq!(spared.response().status, 201);
    assert!(matches!(dropped, Reply::ClosedWithoutResponse));
    assert_eq!(destination.ledger().await.unwrap().deliveries.len(), 2);
}

/// What a client saw of each of a fixed series of requests: a status, or nothing.
async fn outcomes(client: Client) -> Vec<Option<u16>> {
    let mut outcomes = Vec::new();
    // Each reference twice: repeated subjects draw afresh.
    for _round in 0..2 {
        for i in 0..12 {
            let request = delivery(&format!("r-{i}"), &format!("input {i}"));
            let reply = client.deliver(None, &request).await;
            outcomes.push(match reply {
                Reply::Response(response) => Some(response.status),
                Reply::ClosedWithoutResponse => None,
            });
        }
    }
    outcomes
}

fn chaos(seed: u64) -> FaultPlan {
    FaultPlan::random(
        RandomFaults::seeded(seed)
            .rate(Operation::Deliver, FaultKind::Refuse, 0.2)
            .rate(Operation::Deliver, FaultKind::Reject, 0.2)
            .rate(Operation::Deliver, FaultKind::ErrorAfterAccept, 0.2)
            .rate(Operation::Deliver, FaultKind::DropResponse, 0.2),
    )
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_same_seed_gives_the_same_faults_and_another_seed_others(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Opaque).await;

    destination.set_faults(chaos(7)).unwrap();
    let first = outcomes(client).await;
    let first_report = destination.fault_report();
    destination.set_faults(chaos(7)).unwrap();
    let replayed = outcomes(client).await;
    destination.set_faults(chaos(8)).unwrap();
    let reseeded = outcomes(client).await;

    assert_eq!(replayed, first);
    assert_ne!(reseeded, first);
    // Every kind of answer occurs, and the report names what fired and why.
    for expected in [Some(201), Some(503), Some(422), Some(500), None] {
        assert!(
            first.contains(&expected),
            "{expected:?} never happened: {first:?}"
        );
    }
    let faulted = first
        .iter()
        .filter(|outcome| **outcome != Some(201))
        .count();
    assert_eq!(first_report.fired.len(), faulted);
    assert!(
        first_report
            .fired
            .iter()
            .all(|fired| fired.source == FaultSource::Random)
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_fault_plan_is_scriptable_over_http(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Opaque).await;
    let plan = json!({
        "rules": [{"match": {"client_reference": "w-48/deliver-v1"}, "operation": "deliver",
                   "fault": {"refuse": {}}, "times": 1}],
        "random": null,
    });

    let installed = client
        .control("PUT", "/control/faults", &plan.to_string())
        .await
        .response();
    assert_eq!(installed.status, 200);
    let refused = client
        .deliver(None, &delivery("w-48/deliver-v1", "letter"))
        .await
        .response();
    let shown: FaultReport = client
        .control("GET", "/control/faults", "")
        .await
        .response()
        .json();
    let cleared = client
        .control("DELETE", "/control/faults", "")
        .await
        .response();

    assert_eq!(refused.status, 503);
    assert_eq!(shown.rules.len(), 1);
    assert_eq!(shown.rules[0].fired, 1);
    assert_eq!(shown.fired[0].subject, "w-48/deliver-v1");
    assert_eq!(cleared.status, 204);
    assert_eq!(destination.fault_report(), FaultReport::default());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_plan_the_destination_cannot_obey_is_refused(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Opaque).await;
    let misplaced = json!({"rules": [{"match": {"any": true}, "operation": "deliver",
                                      "fault": {"lookup_unavailable": {}}}]});

    for plan in [misplaced.to_string(), "{\"rules\": [{}]}".to_owned()] {
        let answer = client
            .control("PUT", "/control/faults", &plan)
            .await
            .response();

        assert_eq!(answer.status, 400, "{plan}");
        assert!(!answer.body["message"].as_str().unwrap().is_empty());
    }
    assert_eq!(destination.fault_report(), FaultReport::default());
}
