use std::time::Duration;

use chrono::{DateTime, Utc};
use destinations::protocol::{Accepted, LookupAnswer};
use destinations::{
    Config, Fault, FaultPlan, FaultRule, Kind, MIGRATOR, ManualClock, Match, Operation,
};
use sqlx::PgPool;

use crate::client::{delivery, start_with};

const WINDOW: Duration = Duration::from_millis(1500);

fn manual_clock() -> ManualClock {
    let start: DateTime<Utc> = "2026-11-30T12:00:00Z".parse().unwrap();
    ManualClock::starting_at(start)
}

fn queryable(clock: &ManualClock) -> Config {
    Config {
        visibility_window: WINDOW,
        clock: clock.clone().into(),
        ..Config::new(Kind::Queryable)
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_delivery_is_not_found_until_its_visibility_window_has_passed(pool: PgPool) {
    let clock = manual_clock();
    let (_destination, client) = start_with(pool, queryable(&clock)).await;
    // The engine's request keys contain a slash: the path segment carries it percent-encoded.
    let request = delivery("w-17/deliver-v1", "letter");
    let accepted: Accepted = client.deliver(None, &request).await.response().json();
    assert_eq!(accepted.accepted_at, clock.now());

    let not_found = LookupAnswer::NotFound {
        visibility_window_ms: 1500,
    };
    let answer = client
        .look_up("w-17/deliver-v1", Some(&request.digest))
        .await
        .response();
    assert_eq!(
        (answer.status, answer.json::<LookupAnswer>()),
        (200, not_found.clone())
    );
    clock.advance(WINDOW - Duration::from_millis(1));
    let answer = client
        .look_up("w-17/deliver-v1", Some(&request.digest))
        .await
        .response();
    assert_eq!(answer.json::<LookupAnswer>(), not_found);

    clock.advance(Duration::from_millis(1));
    let answer = client
        .look_up("w-17/deliver-v1", Some(&request.digest))
        .await
        .response();
    assert_eq!(
        answer.json::<LookupAnswer>(),
        LookupAnswer::Found {
            external_reference: accepted.external_reference.clone(),
            digest: request.digest,
            accepted_at: accepted.accepted_at,
            all: vec![accepted.external_reference],
        }
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_database_clock_hides_fresh_deliveries_for_the_window_only(pool: PgPool) {
    let lagging = Config {
        name: "lagging".into(),
        visibility_window: Duration::from_secs(3600),
        ..Config::new(Kind::Queryable)
    };
    let immediate = Config {
        name: "immediate".into(),
        visibility_window: Duration::ZERO,
        ..Config::new(Kind::Queryable)
    };
    let (_lagging, lagging) = start_with(pool.clone(), lagging).await;
    let (_immediate, immediate) = start_with(pool, immediate).await;
    let request = delivery("w-18/deliver-v1", "letter");
    lagging.deliver(None, &request).await.response();
    immediate.deliver(None, &request).await.response();

    let hidden = lagging.look_up("w-18/deliver-v1", None).await.response();
    let shown = immediate.look_up("w-18/deliver-v1", None).await.response();

    assert_eq!(
        hidden.json::<LookupAnswer>(),
        LookupAnswer::NotFound {
            visibility_window_ms: 3_600_000
        }
    );
    assert!(matches!(shown.json(), LookupAnswer::Found { .. }));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_lookup_with_another_digest_finds_a_conflicting_delivery(pool: PgPool) {
    let clock = manual_clock();
    let (_destination, client) = start_with(pool, queryable(&clock)).await;
    let stored = delivery("w-19/deliver-v1", "letter");
    let accepted: Accepted = client.deliver(None, &stored).await.response().json();
    clock.advance(WINDOW);

    let asked = delivery("w-19/deliver-v1", "another letter").digest;
    let answer = client
        .look_up("w-19/deliver-v1", Some(&asked))
        .await
        .response();

    assert_eq!(
        answer.json::<LookupAnswer>(),
        LookupAnswer::FoundWithConflictingDigest {
            external_reference: accepted.external_reference.clone(),
            digest: stored.digest,
            all: vec![accepted.external_reference],
        }
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_repeated_create_makes_a_second_delivery_that_lookups_reveal(pool: PgPool) {
    let clock = manual_clock();
    let (destination, client) = start_with(pool, queryable(&clock)).await;
    let request = delivery("w-20/deliver-v1", "letter");

    // The queryable kind ignores the key: a resend is a second delivery.
    let first: Accepted = client.deliver(Some("k"), &request).await.response().json();
    let second = client.deliver(Some("k"), &request).await.response();
    assert_eq!(second.status, 201);
    let second: Accepted = second.json();
    clock.advance(WINDOW);

    let answer = client
        .look_up("w-20/deliver-v1", Some(&request.digest))
        .await
        .response();
    let LookupAnswer::Found {
        external_reference,
        all,
        ..
    } = answer.json()
    else {
        panic!("expected found, got {}", answer.body);
    };
    assert_eq!(external_reference, first.external_reference);
    assert_eq!(all, [first.external_reference, second.external_reference]);
    let ledger = destination.ledger().await.unwrap();
    assert_eq!(ledger.deliveries.len(), 2);
    assert!(
        ledger
            .deliveries
            .iter()
            .all(|delivery| delivery.idempotency_key.is_none())
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn scripted_lookups_answer_unavailable_then_processing_then_the_truth(pool: PgPool) {
    let clock = manual_clock();
    let (destination, client) = start_with(pool, queryable(&clock)).await;
    let request = delivery("w-21/deliver-v1", "letter");
    client.deliver(None, &request).await.response();
    clock.advance(WINDOW);
    let reference = Match::ClientReference("w-21/deliver-v1".into());
    destination
        .set_faults(FaultPlan::rules([
            FaultRule::new(
                Operation::Lookup,
                reference.clone(),
                Fault::LookupUnavailable {},
            )
            .times(1),
            FaultRule::new(Operation::Lookup, reference, Fault::LookupProcessing {}).times(1),
        ]))
        .unwrap();

    let unavailable = client.look_up("w-21/deliver-v1", None).await.response();
    let processing = client.look_up("w-21/deliver-v1", None).await.response();
    let truth = client.look_up("w-21/deliver-v1", None).await.response();

    assert_eq!(unavailable.status, 503);
    assert_eq!(
        unavailable.json::<LookupAnswer>(),
        LookupAnswer::Unavailable
    );
    assert_eq!(processing.status, 200);
    assert_eq!(processing.json::<LookupAnswer>(), LookupAnswer::Processing);
    assert!(matches!(truth.json(), LookupAnswer::Found { .. }));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_malformed_lookup_digest_is_a_400(pool: PgPool) {
    let clock = manual_clock();
    let (_destination, client) = start_with(pool, queryable(&clock)).await;

    let answer = client
        .look_up("w-22/deliver-v1", Some("md5:abc"))
        .await
        .response();

    assert_eq!(answer.status, 400);
    assert_eq!(answer.code(), "malformed_request");
}
