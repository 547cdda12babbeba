//! What speaks for a request: the claims of the adapter version it was sent under (what a
//! later version's verification proved says nothing about it); a withdrawal is sent only while
//! its claim counts; and a rule proven by a lookup counts only while the lookup does
//! (docs/DESIGN.md §5).

use destinations::{Config, Fault, FaultPlan, FaultRule, Match, Operation};
use engine::adapter::apply::{self, Verified};
use engine::adapter::registry::Adapters;
use engine::domain::{Claim, OperatorAction, Role, StepState, Trust};
use engine::recovery::{Action, ActionError, Request};
use sqlx::PgPool;
use uuid::Uuid;

use crate::trust::{
    PAYMENTS, applied, charge_of, charges_for, file, lose_answer_once, payments, start, until,
    worker,
};

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_request_sent_under_one_version_gets_no_retry_from_the_next_versions_claims(
    pool: PgPool,
) {
    let destination = payments(&pool, Config::payments()).await;
    let v1 = file(PAYMENTS, &destination.base_url()).replace(
        "unknown_outcome_policy: query",
        "unknown_outcome_policy: review",
    );
    applied(&pool, &v1, Some(&destination.base_url())).await;
    lose_answer_once(&destination, "order-v1");
    let worker = worker(&pool, Adapters::load(&pool).await.unwrap());
    let workflow = start(&pool, "order-v1").await;
    until(&pool, &worker, workflow, StepState::ReviewRequired).await;
    let step = charge_of(&pool, workflow).await;
    let evidence = || async {
        engine::read::evidence::evidence(&pool, step)
            .await
            .unwrap()
            .unwrap()
    };
    assert!(
        evidence()
            .await
            .permitted_actions()
            .contains(&OperatorAction::RetrySameKey)
    );

    // Version 2, verified: every claim it makes is proven, for its own requests.
    let v2 = v1.replace("deadline_ms: 1000", "deadline_ms: 1100");
    let Some(Verified::Passed { .. }) = applied(&pool, &v2, Some(&destination.base_url())).await
    else {
        panic!("version 2 did not pass verification");
    };
    let page = evidence().await;
    assert_eq!(page.sent_version, Some(1));
    assert_eq!(page.trust.as_ref().unwrap().version, 2);
    let offered = page.permitted_actions();
    for action in [
        OperatorAction::RetrySameKey,
        OperatorAction::CheckDestination,
        OperatorAction::Replace,
    ] {
        assert!(!offered.contains(&action), "{action:?} in {offered:?}");
    }
    assert!(offered.contains(&OperatorAction::Waive), "{offered:?}");

    let approver = crate::operate::person("versions", Role::Approver);
    let refused = engine::recovery::perform(
        &pool,
        Request {
            operator: &approver,
            step,
            seen_version: None,
            reason: "the new version has a key",
            action: Action::RetrySameKey,
        },
    )
    .await;
    assert!(
        matches!(refused, Err(ActionError::NotPermitted(_))),
        "{refused:?}"
    );
    let (state, attempts): (StepState, i32) =
        sqlx::query_as("select state, attempt_count from step where id = $1")
            .bind(step)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((state, attempts), (StepState::ReviewRequired, 1));
    assert_eq!(charges_for(&destination, "order-v1").await.len(), 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_withdrawal_waiting_to_be_sent_sends_nothing_once_its_claim_is_refuted(pool: PgPool) {
    let destination = payments(&pool, Config::payments()).await;
    let source = file(PAYMENTS, &destination.base_url());
    applied(&pool, &source, Some(&destination.base_url())).await;
    let worker = worker(&pool, Adapters::load(&pool).await.unwrap());
    let workflow = start(&pool, "order-refund").await;
    until(&pool, &worker, workflow, StepState::Succeeded).await;
    let charge = charge_of(&pool, workflow).await;
    let approver = crate::operate::person("withdrawals", Role::Approver);
    engine::recovery::perform(
        &pool,
        Request {
            operator: &approver,
            step: charge,
            seen_version: None,
            reason: "the customer cancelled",
            action: Action::Cancel,
        },
    )
    .await
    .unwrap();

    // Verified again while refunds are refused: the withdrawal claim is refuted.
    destination
        .set_faults(FaultPlan::rules([FaultRule::new(
            Operation::Withdraw,
            Match::Any,
            Fault::Reject {
                code: "refunds_disabled".into(),
                retryable: false,
            },
        )
        .times(1)]))
        .unwrap();
    let again = apply::verify(&pool, "payments", &destination.base_url())
        .await
        .unwrap();
    let (Verified::Passed { report, .. } | Verified::Failed { report, .. }) = again;
    assert_eq!(report.verdict(&Claim::Withdrawal).trust, Trust::Refuted);

    let worker = crate::trust::worker(&pool, Adapters::load(&pool).await.unwrap());
    for _ in 0..20 {
        if worker.run_once().await.unwrap().is_empty() {
            break;
        }
    }
    let (state, said): (StepState, bool) = sqlx::query_as(
        "select s.state, exists(select 1 from observation o where o.step_id = s.id
                                  and o.body::text like '%withdrawal claim%')
         from step s join compensation_link c on c.compensation_step_id = s.id
         where c.original_step_id = $1",
    )
    .bind(charge)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_ne!(state, StepState::Succeeded);
    assert!(
        matches!(state, StepState::Unsent | StepState::ReviewRequired),
        "{state:?}"
    );
    assert!(said, "the step's observation says why nothing was sent");
    // The verification's own probes refund charges of their own; this order's is not refunded.
    let charged = charges_for(&destination, "order-refund").await;
    assert_eq!(charged.len(), 1);
    let ledger = destination.ledger().await.unwrap();
    assert!(
        ledger.refunds.iter().all(|r| r.charge != charged[0]),
        "{:?}",
        ledger.refunds
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_key_production_refutes_stops_a_running_workers_resends_at_once(pool: PgPool) {
    let destination = payments(&pool, Config::payments()).await;
    let source = file(PAYMENTS, &destination.base_url());
    applied(&pool, &source, Some(&destination.base_url())).await;
    lose_answer_once(&destination, "order-refuted");
    // Loaded while the key counted, and never reloaded (a library worker has no refresh).
    let worker = worker(&pool, Adapters::load(&pool).await.unwrap());
    let workflow = start(&pool, "order-refuted").await;
    until(&pool, &worker, workflow, StepState::OutcomeUnknown).await;
    let step = charge_of(&pool, workflow).await;

    // Production contradicts the key (a duplicate-effect incident refutes it).
    let mut conn = pool.acquire().await.unwrap();
    let refuted = engine::store::adapter::refute_for_step(
        &mut conn,
        step,
        Claim::IdempotencyKey,
        "two charges for one key",
    )
    .await
    .unwrap();
    assert_eq!(refuted.as_deref(), Some("payments"));
    drop(conn);

    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let (state, attempts) = loop {
        let (state, attempts): (StepState, i32) =
            sqlx::query_as("select state, attempt_count from step where id = $1")
                .bind(step)
                .fetch_one(&pool)
                .await
                .unwrap();
        if state != StepState::OutcomeUnknown || tokio::time::Instant::now() > deadline {
            break (state, attempts);
        }
        if worker.run_once().await.unwrap().is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    // Recovered by the lookup, which still counts, or sent to a person: never sent again.
    assert_ne!(state, StepState::OutcomeUnknown);
    assert_eq!(attempts, 1, "resent under a refuted key ({state:?})");
    assert_eq!(charges_for(&destination, "order-refuted").await.len(), 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_failed_before_effect_rule_counts_only_while_the_lookup_that_proved_it_does(
    pool: PgPool,
) {
    use engine::adapter::Adapter;
    use engine::domain::{InputDigest, Operation as Op, RequestKey, TransportObservation};
    let destination = payments(&pool, Config::payments()).await;
    let source = file(PAYMENTS, &destination.base_url());
    // Rule 3 reads a parameter error as failed before effect; the lookup proved it.
    let rule = Claim::Rule {
        operation: Op::Deliver,
        index: 3,
    };
    let invalid = serde_json::json!({ "amount": 0, "currency": "eur", "customer": "cus_ada", "subject": "order-0" });
    let send = |verified: Vec<Claim>| {
        let source = source.clone();
        let invalid = invalid.clone();
        async move {
            let built = apply::build(&source).unwrap();
            let contract = built.contract().clone();
            let adapter = built.with_trust(contract, verified);
            let key = RequestKey::from(format!("w/charge-{}", Uuid::new_v4()));
            let digest = InputDigest::of_json(&invalid);
            let prepared = adapter.prepare(&key, &invalid, &digest).unwrap();
            adapter.deliver(&key, &prepared).await
        }
    };
    let with_lookup = send(vec![Claim::Delivery, Claim::Lookup, rule.clone()]).await;
    assert!(
        matches!(with_lookup, TransportObservation::NotAccepted { .. }),
        "{with_lookup:?}"
    );
    // The lookup refuted since (a later run, or production): its witness proves nothing.
    let without = send(vec![Claim::Delivery, rule]).await;
    assert!(
        matches!(without, TransportObservation::Unproven { .. }),
        "{without:?}"
    );
}
