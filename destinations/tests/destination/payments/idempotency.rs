//! `Idempotency-Key`: the first answer replayed byte for byte, one charge per key under
//! concurrency, until the retention; and a destination that does not honour keys at all.

use std::sync::Arc;
use std::time::Duration;

use destinations::payments::{Charge, KEY_IN_USE_MESSAGE};
use destinations::{Config, MIGRATOR};
use sqlx::PgPool;
use tokio::sync::Barrier;

use super::{error, manual_clock, start};

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_same_key_replays_the_first_answer_byte_for_byte(pool: PgPool) {
    let (destination, payments) = start(pool, Config::payments()).await;
    let form = "amount=700&currency=eur&metadata[subject]=w-2/pay-v1";
    let declined = "amount=700&currency=eur&customer=cus_declined";

    let first = payments.charge(Some("w-2/pay-v1"), form).await;
    // The same parameters in another order are the same request.
    let again = payments
        .charge(
            Some("w-2/pay-v1"),
            "metadata[subject]=w-2/pay-v1&currency=eur&amount=700",
        )
        .await;
    let first_decline = payments.charge(Some("w-3/pay-v1"), declined).await;
    let again_decline = payments.charge(Some("w-3/pay-v1"), declined).await;

    assert_eq!(first.status, 200);
    assert_eq!(
        (again.status, again.text.as_str()),
        (200, first.text.as_str())
    );
    assert_eq!(first.header("idempotent-replayed"), None);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(first_decline.status, 402);
    assert_eq!(
        (again_decline.status, again_decline.text.as_str()),
        (402, first_decline.text.as_str())
    );
    assert_eq!(again_decline.header("idempotent-replayed"), Some("true"));
    let ledger = destination.ledger().await.unwrap();
    assert_eq!(ledger.charges_with_key("w-2/pay-v1").count(), 1);
    assert_eq!(ledger.declines.len(), 1);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_replayed_parameter_error_is_the_first_answer_too(pool: PgPool) {
    let (destination, payments) = start(pool, Config::payments()).await;

    let first = payments.charge(Some("w-4/pay-v1"), "currency=eur").await;
    let again = payments.charge(Some("w-4/pay-v1"), "currency=eur").await;

    assert_eq!((first.status, again.status), (400, 400));
    assert_eq!(again.text, first.text);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert!(destination.ledger().await.unwrap().charges.is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_same_key_with_other_parameters_answers_idempotency_error_and_records_nothing(
    pool: PgPool,
) {
    let (destination, payments) = start(pool, Config::payments()).await;
    payments
        .charge(Some("w-5/pay-v1"), "amount=100&currency=eur")
        .await;

    let other = payments
        .charge(Some("w-5/pay-v1"), "amount=101&currency=eur")
        .await;

    assert_eq!(other.status, 400);
    assert_eq!(other.header("idempotent-replayed"), None);
    let error = error(&other);
    assert_eq!(error.kind, "idempotency_error");
    assert_eq!(error.code.as_deref(), Some("idempotency_key_in_use"));
    assert_eq!(error.message, KEY_IN_USE_MESSAGE);
    let ledger = destination.ledger().await.unwrap();
    assert_eq!(ledger.charges.len(), 1);
    assert_eq!(ledger.charges[0].amount, 100);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn eight_concurrent_charges_with_one_key_make_one_charge(pool: PgPool) {
    let (destination, payments) = start(pool, Config::payments()).await;
    let barrier = Arc::new(Barrier::new(8));

    let senders: Vec<_> = (0..8)
        .map(|_| {
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                payments
                    .charge(Some("w-6/pay-v1"), "amount=900&currency=eur")
                    .await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for sender in senders {
        answers.push(sender.await.unwrap());
    }

    assert!(answers.iter().all(|answer| answer.status == 200));
    assert!(answers.iter().all(|answer| answer.text == answers[0].text));
    let replayed = answers
        .iter()
        .filter(|answer| answer.header("idempotent-replayed") == Some("true"))
        .count();
    assert_eq!(replayed, 7);
    assert_eq!(destination.ledger().await.unwrap().charges.len(), 1);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn past_the_retention_the_key_makes_a_new_charge(pool: PgPool) {
    let clock = manual_clock();
    let config = Config {
        clock: clock.clone().into(),
        idempotency_retention: Duration::from_secs(24 * 60 * 60),
        ..Config::payments()
    };
    let (destination, payments) = start(pool, config).await;
    let form = "amount=300&currency=eur";

    let first: Charge = payments.charge(Some("w-7/pay-v1"), form).await.json();
    clock.advance(Duration::from_secs(24 * 60 * 60 - 1));
    let inside = payments.charge(Some("w-7/pay-v1"), form).await;
    clock.advance(Duration::from_secs(1));
    let past = payments.charge(Some("w-7/pay-v1"), form).await;

    assert_eq!(inside.header("idempotent-replayed"), Some("true"));
    assert_eq!(inside.json::<Charge>().id, first.id);
    assert_eq!(past.status, 200);
    assert_eq!(past.header("idempotent-replayed"), None);
    assert_ne!(past.json::<Charge>().id, first.id);
    assert_eq!(
        destination
            .ledger()
            .await
            .unwrap()
            .charges_with_key("w-7/pay-v1")
            .count(),
        2
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_destination_that_does_not_honour_keys_charges_twice_under_one_key(pool: PgPool) {
    let config = Config {
        honours_idempotency: false,
        ..Config::payments()
    };
    let (destination, payments) = start(pool, config).await;

    let first = payments
        .charge(Some("w-8/pay-v1"), "amount=300&currency=eur")
        .await;
    let second = payments
        .charge(Some("w-8/pay-v1"), "amount=300&currency=eur")
        .await;

    assert_eq!((first.status, second.status), (200, 200));
    assert_eq!(second.header("idempotent-replayed"), None);
    assert_ne!(first.json::<Charge>().id, second.json::<Charge>().id);
    let ledger = destination.ledger().await.unwrap();
    assert_eq!(ledger.charges_with_key("w-8/pay-v1").count(), 2);
}
