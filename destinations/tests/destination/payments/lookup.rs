//! Looking charges up (directly, and by a search that lags) and refunding them.

use std::time::Duration;

use destinations::payments::{Charge, Refund, SearchResult};
use destinations::{Config, Fault, FaultPlan, FaultRule, MIGRATOR, Match, Operation};
use sqlx::PgPool;

use super::{error, manual_clock, start};

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_search_finds_a_charge_only_after_the_visibility_window(pool: PgPool) {
    let clock = manual_clock();
    let config = Config {
        clock: clock.clone().into(),
        visibility_window: Duration::from_secs(60),
        ..Config::payments()
    };
    let (_destination, payments) = start(pool, config).await;
    let charge: Charge = payments
        .charge(None, "amount=250&currency=eur&metadata[subject]=w-9/pay-v1")
        .await
        .json();
    payments
        .charge(
            None,
            "amount=250&currency=eur&metadata[subject]=w-10/pay-v1",
        )
        .await;
    let search = "/v1/charges/search?query=metadata%5B%27subject%27%5D%3A%27w-9%2Fpay-v1%27";

    let inside = payments.get(search).await;
    let direct = payments.get(&format!("/v1/charges/{}", charge.id)).await;
    clock.advance(Duration::from_secs(60));
    let after = payments.get(search).await;

    assert_eq!(inside.status, 200);
    let inside: SearchResult = inside.json();
    assert!(inside.data.is_empty());
    assert_eq!(
        (inside.object.as_str(), inside.url.as_str(), inside.has_more),
        ("search_result", "/v1/charges/search", false)
    );
    assert_eq!(direct.status, 200, "a direct read has no lag");
    let after: SearchResult = after.json();
    let found: Vec<_> = after.data.iter().map(|charge| charge.id.as_str()).collect();
    assert_eq!(found, [charge.id.as_str()]);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_search_of_another_shape_and_an_unknown_charge_are_refused(pool: PgPool) {
    let (_destination, payments) = start(pool, Config::payments()).await;

    let shape = payments.get("/v1/charges/search?query=amount%3E100").await;
    let unknown = payments
        .get("/v1/charges/ch_000000000000000000000000")
        .await;

    assert_eq!(shape.status, 400);
    assert_eq!(error(&shape).code.as_deref(), Some("parameter_invalid"));
    assert_eq!(error(&shape).param.as_deref(), Some("query"));
    assert_eq!(unknown.status, 404);
    assert_eq!(error(&unknown).code.as_deref(), Some("resource_missing"));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_charge_is_refunded_once_replayed_under_its_key_and_refused_a_second_time(pool: PgPool) {
    let (destination, payments) = start(pool, Config::payments()).await;
    let charge: Charge = payments
        .charge(None, "amount=800&currency=eur")
        .await
        .json();
    let form = format!("charge={}&reason=requested_by_customer", charge.id);

    let refunded = payments.refund(Some("w-13/refund-v1"), &form).await;
    let replayed = payments.refund(Some("w-13/refund-v1"), &form).await;
    let second = payments.refund(Some("w-13/refund-v2"), &form).await;
    let unknown = payments
        .refund(None, "charge=ch_000000000000000000000000")
        .await;

    assert_eq!(refunded.status, 200, "{}", refunded.text);
    let refund: Refund = refunded.json();
    assert!(refund.id.starts_with("re_"));
    assert_eq!(
        (
            refund.object.as_str(),
            refund.charge.as_str(),
            refund.amount
        ),
        ("refund", charge.id.as_str(), 800)
    );
    assert_eq!(refund.status, "succeeded");
    assert_eq!(replayed.text, refunded.text);
    assert_eq!(replayed.header("idempotent-replayed"), Some("true"));
    assert_eq!(second.status, 400);
    assert_eq!(
        error(&second).code.as_deref(),
        Some("charge_already_refunded")
    );
    assert_eq!(unknown.status, 404);
    assert_eq!(error(&unknown).code.as_deref(), Some("resource_missing"));
    assert_eq!(error(&unknown).param.as_deref(), Some("charge"));
    let ledger = destination.ledger().await.unwrap();
    assert_eq!(ledger.refunds.len(), 1);
    assert_eq!(ledger.refunds[0].charge, charge.id);
    assert!(ledger.charges[0].refunded);
    let fetched: Charge = payments
        .get(&format!("/v1/charges/{}", charge.id))
        .await
        .json();
    assert!(fetched.refunded);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_unavailable_lookup_answers_503_and_a_processing_one_is_refused(pool: PgPool) {
    let (destination, payments) = start(pool, Config::payments()).await;
    let charge: Charge = payments.charge(None, "amount=20&currency=eur").await.json();
    let unavailable = FaultRule::new(
        Operation::Lookup,
        Match::ExternalReference(charge.id.clone()),
        Fault::LookupUnavailable {},
    );
    let processing = FaultRule::new(Operation::Lookup, Match::Any, Fault::LookupProcessing {});

    let refused = destination.set_faults(FaultPlan::rules([processing]));
    destination
        .set_faults(FaultPlan::rules([unavailable]))
        .unwrap();
    let answer = payments.get(&format!("/v1/charges/{}", charge.id)).await;

    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(answer.status, 503);
    assert_eq!(error(&answer).kind, "api_error");
}
