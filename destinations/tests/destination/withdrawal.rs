use destinations::protocol::{Accepted, WITHDRAWAL_LIMITS, Withdrawn, code};
use destinations::{Fault, FaultPlan, FaultRule, Kind, MIGRATOR, Match, Operation};
use sqlx::PgPool;

use crate::client::{Client, Reply, delivery, start};

async fn delivered(client: &Client, client_reference: &str) -> String {
    let request = delivery(client_reference, "letter");
    let accepted: Accepted = client
        .deliver(Some(client_reference), &request)
        .await
        .response()
        .json();
    accepted.external_reference
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_withdrawal_is_its_own_effect_deduplicated_by_key(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Opaque).await;
    let delivery = delivered(&client, "w-60/deliver-v1").await;

    let first = client
        .withdraw(&delivery, Some("w-60/withdraw-v1"))
        .await
        .response();
    let again = client
        .withdraw(&delivery, Some("w-60/withdraw-v1"))
        .await
        .response();

    assert_eq!((first.status, again.status), (201, 200));
    let (first, again): (Withdrawn, Withdrawn) = (first.json(), again.json());
    assert!(first.withdrawal_reference.starts_with("w-"));
    assert_eq!(first.external_reference, delivery);
    assert_eq!(first.limits, WITHDRAWAL_LIMITS);
    assert!(!first.replayed);
    assert_eq!(
        again,
        Withdrawn {
            replayed: true,
            ..first.clone()
        }
    );

    let ledger = destination.ledger().await.unwrap();
    assert_eq!(ledger.withdrawals.len(), 1);
    assert_eq!(
        ledger.withdrawals[0].withdrawal_reference,
        first.withdrawal_reference
    );
    assert_eq!(ledger.withdrawals[0].idempotency_key, "w-60/withdraw-v1");
    assert!(ledger.deliveries[0].withdrawn);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn withdrawing_again_under_another_key_returns_the_original_withdrawal(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Idempotent).await;
    let delivery = delivered(&client, "w-61/deliver-v1").await;
    let first: Withdrawn = client
        .withdraw(&delivery, Some("first"))
        .await
        .response()
        .json();

    let second = client.withdraw(&delivery, Some("second")).await.response();

    assert_eq!(second.status, 200);
    assert_eq!(
        second.json::<Withdrawn>(),
        Withdrawn {
            replayed: true,
            ..first
        }
    );
    assert_eq!(destination.ledger().await.unwrap().withdrawals.len(), 1);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_withdrawal_key_reused_for_another_delivery_is_rejected(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Queryable).await;
    let one = delivered(&client, "w-62/deliver-v1").await;
    let other = delivered(&client, "w-63/deliver-v1").await;
    client.withdraw(&one, Some("k")).await.response();

    let conflict = client.withdraw(&other, Some("k")).await.response();

    assert_eq!(conflict.status, 422);
    assert_eq!(conflict.code(), code::IDEMPOTENCY_KEY_CONFLICT);
    assert_eq!(conflict.body["accepted"], false);
    let ledger = destination.ledger().await.unwrap();
    assert_eq!(ledger.withdrawals.len(), 1);
    assert!(!ledger.deliveries[1].withdrawn);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn withdrawing_an_unknown_delivery_answers_404(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Opaque).await;

    let answer = client.withdraw("x-999999", Some("k")).await.response();

    assert_eq!(answer.status, 404);
    assert_eq!(answer.code(), code::UNKNOWN_DELIVERY);
    assert!(destination.ledger().await.unwrap().withdrawals.is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_withdrawal_needs_a_key_on_every_kind(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Opaque).await;
    let delivery = delivered(&client, "w-64/deliver-v1").await;

    let answer = client.withdraw(&delivery, None).await.response();

    assert_eq!(answer.status, 400);
    assert_eq!(answer.code(), code::MISSING_IDEMPOTENCY_KEY);
    assert!(destination.ledger().await.unwrap().withdrawals.is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_dropped_withdrawal_answer_closes_the_connection_after_the_withdrawal_was_committed(
    pool: PgPool,
) {
    let (destination, client) = start(pool, Kind::Opaque).await;
    let delivery = delivered(&client, "w-65/deliver-v1").await;
    let rule = FaultRule::new(
        Operation::Withdraw,
        Match::ExternalReference(delivery.clone()),
        Fault::WithdrawalDrop {},
    )
    .times(1);
    destination.set_faults(FaultPlan::rules([rule])).unwrap();

    let dropped = client.withdraw(&delivery, Some("w-65/withdraw-v1")).await;
    let retried = client
        .withdraw(&delivery, Some("w-65/withdraw-v1"))
        .await
        .response();

    assert!(
        matches!(dropped, Reply::ClosedWithoutResponse),
        "{dropped:?}"
    );
    let ledger = destination.ledger().await.unwrap();
    assert_eq!(ledger.withdrawals.len(), 1);
    assert_eq!(retried.status, 200);
    let retried: Withdrawn = retried.json();
    assert!(retried.replayed);
    assert_eq!(
        retried.withdrawal_reference,
        ledger.withdrawals[0].withdrawal_reference
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_refused_withdrawal_commits_nothing(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Opaque).await;
    let delivery = delivered(&client, "w-66/deliver-v1").await;
    let rule = FaultRule::new(Operation::Withdraw, Match::Any, Fault::Refuse {});
    destination.set_faults(FaultPlan::rules([rule])).unwrap();

    let answer = client
        .withdraw(&delivery, Some("w-66/withdraw-v1"))
        .await
        .response();

    assert_eq!((answer.status, answer.code()), (503, code::UNAVAILABLE));
    assert!(destination.ledger().await.unwrap().withdrawals.is_empty());
}
