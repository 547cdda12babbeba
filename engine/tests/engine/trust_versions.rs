//! A request is judged by the claims of the adapter version it was sent under: what a later
//! version's verification proved says nothing about it (docs/DESIGN.md §5).

use destinations::{Config, Fault, FaultPlan, FaultRule, Match, Operation};
use engine::adapter::apply::Verified;
use engine::adapter::registry::Adapters;
use engine::domain::{OperatorAction, Role, StepState};
use engine::recovery::{Action, ActionError, Request};
use sqlx::PgPool;
use uuid::Uuid;

use crate::trust::{PAYMENTS, applied, charges_for, file, payments, start, until, worker};

async fn charge_of(pool: &PgPool, workflow: Uuid) -> Uuid {
    sqlx::query_scalar("select id from step where workflow_id = $1")
        .bind(workflow)
        .fetch_one(pool)
        .await
        .unwrap()
}

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
    destination
        .set_faults(FaultPlan::rules([FaultRule::new(
            Operation::Deliver,
            Match::ClientReference("order-v1".into()),
            Fault::DropResponse {},
        )
        .times(1)]))
        .unwrap();
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
