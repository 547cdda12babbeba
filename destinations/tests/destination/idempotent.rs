use std::sync::Arc;

use destinations::protocol::{Accepted, Problem, code};
use destinations::{Kind, MIGRATOR};
use sqlx::PgPool;
use tokio::sync::Barrier;

use crate::client::{delivery, start};

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_same_key_and_digest_return_the_original_delivery(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Idempotent).await;
    let request = delivery("w-1/deliver-v1", "letter one");

    let first = client
        .deliver(Some("w-1/deliver-v1"), &request)
        .await
        .response();
    let again = client
        .deliver(Some("w-1/deliver-v1"), &request)
        .await
        .response();

    assert_eq!(first.status, 201);
    assert_eq!(again.status, 200);
    let first: Accepted = first.json();
    let again: Accepted = again.json();
    assert!(!first.replayed);
    assert_eq!(
        again,
        Accepted {
            replayed: true,
            ..first.clone()
        }
    );
    assert!(first.external_reference.starts_with("x-"));

    let ledger = destination.ledger().await.unwrap();
    assert_eq!(ledger.deliveries.len(), 1);
    assert_eq!(
        ledger.deliveries[0].external_reference,
        first.external_reference
    );
    assert_eq!(
        ledger.deliveries[0].idempotency_key.as_deref(),
        Some("w-1/deliver-v1")
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn twenty_concurrent_duplicates_make_one_delivery(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Idempotent).await;
    let request = delivery("w-2/deliver-v1", "letter two");
    let barrier = Arc::new(Barrier::new(20));

    let senders: Vec<_> = (0..20)
        .map(|_| {
            let (barrier, request) = (barrier.clone(), request.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                client
                    .deliver(Some("w-2/deliver-v1"), &request)
                    .await
                    .response()
            })
        })
        .collect();
    let mut answers = Vec::new();
    for sender in senders {
        answers.push(sender.await.unwrap());
    }

    let created = answers.iter().filter(|answer| answer.status == 201).count();
    let replayed = answers.iter().filter(|answer| answer.status == 200).count();
    assert_eq!((created, replayed), (1, 19));
    let references: Vec<String> = answers
        .iter()
        .map(|answer| answer.json::<Accepted>().external_reference)
        .collect();
    assert!(
        references
            .iter()
            .all(|reference| *reference == references[0])
    );
    assert_eq!(destination.ledger().await.unwrap().deliveries.len(), 1);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_key_reused_with_another_digest_is_rejected_and_commits_nothing(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Idempotent).await;
    let original = delivery("w-3/deliver-v1", "letter three");
    let altered = delivery("w-3/deliver-v1", "letter three, edited");
    client
        .deliver(Some("w-3/deliver-v1"), &original)
        .await
        .response();

    let conflict = client
        .deliver(Some("w-3/deliver-v1"), &altered)
        .await
        .response();

    assert_eq!(conflict.status, 422);
    let problem: Problem = conflict.json();
    assert_eq!(problem.code, code::IDEMPOTENCY_KEY_CONFLICT);
    assert_eq!(
        (problem.retryable, problem.accepted),
        (Some(false), Some(false))
    );
    assert!(
        problem.message.contains(&original.digest),
        "{}",
        problem.message
    );
    let ledger = destination.ledger().await.unwrap();
    assert_eq!(ledger.deliveries.len(), 1);
    assert_eq!(ledger.deliveries[0].digest, original.digest);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_idempotent_kind_refuses_a_delivery_without_a_key(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Idempotent).await;

    let answer = client
        .deliver(None, &delivery("w-4/deliver-v1", "letter four"))
        .await
        .response();

    assert_eq!(answer.status, 400);
    assert_eq!(answer.code(), code::MISSING_IDEMPOTENCY_KEY);
    assert_eq!(answer.body["accepted"], false);
    assert!(destination.ledger().await.unwrap().deliveries.is_empty());
}
