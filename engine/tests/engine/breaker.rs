//! An adapter's breaker (docs/DESIGN.md §20): after the attempts its file names end in trouble
//! within its window, the adapter is held — nothing new reaches the provider, by the
//! destination's own ledger — an alert stays open with the attempts that tripped it, and only a
//! person's resume lets it send again, without tripping again on the same attempts.

use destinations::{Config, Fault, FaultPlan, FaultRule, Match, Operation};
use engine::adapter::registry::Adapters;
use engine::domain::{Role, StepState};
use engine::recovery::hold::resume_adapter;
use engine::store::journal::Actor;
use engine::watch::alerts::{AlertRules, evaluate};
use engine::watch::breaker::trip_breakers;
use sqlx::PgPool;

use crate::trust::{PAYMENTS, applied, charges_for, file, payments, start, until, worker};

async fn open_alerts(pool: &PgPool) -> Vec<(String, String)> {
    sqlx::query_as(
        "select rule, subject from alert where resolved_at is null and rule = 'adapter_breaker'",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_breaker_holds_its_adapter_after_troubled_attempts_until_a_person_resumes_it(
    pool: PgPool,
) {
    let destination = payments(&pool, Config::payments()).await;
    let url = destination.base_url();
    let source = file(PAYMENTS, &url) + "breaker:\n  trips_after: 2\n  within: 60s\n";
    applied(&pool, &source, Some(&url)).await;
    let lost = |order: &str| {
        FaultRule::new(
            Operation::Deliver,
            Match::ClientReference(order.into()),
            Fault::DropResponse {},
        )
        .times(1)
    };
    destination
        .set_faults(FaultPlan::rules([lost("order-1"), lost("order-2")]))
        .unwrap();
    let worker = worker(&pool, Adapters::load(&pool).await.unwrap());
    let first = start(&pool, "order-1").await;
    until(&pool, &worker, first, StepState::Succeeded).await;
    assert!(
        trip_breakers(&pool).await.unwrap().is_empty(),
        "one lost answer is not two"
    );
    let second = start(&pool, "order-2").await;
    until(&pool, &worker, second, StepState::Succeeded).await;

    let tripped = trip_breakers(&pool).await.unwrap();
    assert_eq!(tripped.len(), 1);
    assert_eq!(tripped[0].held_by, "breaker");
    let evidence = tripped[0].tripped_by.clone().unwrap();
    assert_eq!(evidence.as_array().unwrap().len(), 2, "{evidence}");
    evaluate(&pool, &AlertRules::default()).await.unwrap();
    assert_eq!(
        open_alerts(&pool).await,
        [("adapter_breaker".to_owned(), "payments".to_owned())]
    );

    let third = start(&pool, "order-3").await;
    until(&pool, &worker, third, StepState::Held).await;
    assert!(
        charges_for(&destination, "order-3").await.is_empty(),
        "nothing new reached it"
    );
    assert!(
        trip_breakers(&pool).await.unwrap().is_empty(),
        "held already"
    );

    let ana = (Actor::Operator("ana"), Role::Approver);
    let resumed = resume_adapter(&pool, ana, "payments", "the provider recovered", None)
        .await
        .unwrap();
    assert_eq!(resumed.released, 1);
    assert!(
        trip_breakers(&pool).await.unwrap().is_empty(),
        "the attempts a person has seen do not trip it again"
    );
    until(&pool, &worker, third, StepState::Succeeded).await;
    assert_eq!(charges_for(&destination, "order-3").await.len(), 1);
    evaluate(&pool, &AlertRules::default()).await.unwrap();
    assert!(
        open_alerts(&pool).await.is_empty(),
        "resolved by the resume"
    );
    let audited: Vec<String> =
        sqlx::query_scalar("select actor from audit where action = 'adapter_hold'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(audited, ["breaker"]);
}
