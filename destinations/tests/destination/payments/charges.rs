//! Charges: committed before they are answered, refused before anything when the request is
//! not one, declined with a record of the attempt, and the faults that spoil the answer.

use destinations::payments::Charge;
use destinations::{Config, Fault, FaultPlan, FaultRule, MIGRATOR, Match, Operation};
use sqlx::PgPool;

use super::{API_KEY, FORM, error, start};
use crate::client::Reply;

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_charge_is_committed_and_shown_in_the_ledger(pool: PgPool) {
    let (destination, payments) = start(pool, Config::payments()).await;

    let answer = payments
        .charge(
            Some("w-1/pay-v1"),
            "amount=1234&currency=eur&description=Invoice+7&customer=cus_ada\
             &metadata[subject]=w-1/pay-v1&metadata[order]=7",
        )
        .await;

    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.header("idempotent-replayed"), None);
    let charge: Charge = answer.json();
    assert!(
        charge.id.starts_with("ch_") && charge.id.len() == 27,
        "{}",
        charge.id
    );
    assert!(charge.id[3..].bytes().all(|b| b.is_ascii_alphanumeric()));
    assert_eq!(
        (
            charge.object.as_str(),
            charge.amount,
            charge.currency.as_str()
        ),
        ("charge", 1234, "eur")
    );
    assert_eq!(charge.status, "succeeded");
    assert_eq!(charge.description.as_deref(), Some("Invoice 7"));
    assert_eq!(charge.customer.as_deref(), Some("cus_ada"));
    assert_eq!(charge.metadata["order"], "7");
    let ledger = destination.ledger().await.unwrap();
    let charges: Vec<_> = ledger.charges_for("w-1/pay-v1").collect();
    assert_eq!(charges.len(), 1);
    assert_eq!(charges[0].id, charge.id);
    assert_eq!(charges[0].idempotency_key.as_deref(), Some("w-1/pay-v1"));
    assert_eq!(charges[0].created_at.timestamp(), charge.created);
    assert!(ledger.deliveries.is_empty() && ledger.declines.is_empty());

    let fetched = payments.get(&format!("/v1/charges/{}", charge.id)).await;
    assert_eq!(fetched.status, 200);
    assert_eq!(fetched.json::<Charge>(), charge);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_json_body_answers_415_and_records_nothing(pool: PgPool) {
    let (destination, payments) = start(pool, Config::payments()).await;
    let headers = [("Authorization", payments.authorization)];

    let answer = payments
        .client
        .send_with(
            ("POST", "/v1/charges"),
            "application/json",
            &headers,
            br#"{"amount": 1234, "currency": "eur"}"#,
        )
        .await
        .response();

    assert_eq!(answer.status, 415);
    let error = error(&answer);
    assert_eq!(error.kind, "invalid_request_error");
    assert_eq!(error.code.as_deref(), Some("unsupported_media_type"));
    assert!(destination.ledger().await.unwrap().charges.is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_missing_amount_answers_parameter_missing_and_records_nothing(pool: PgPool) {
    let (destination, payments) = start(pool, Config::payments()).await;

    let missing = payments.charge(Some("k-missing"), "currency=eur").await;
    let invalid = payments.charge(None, "amount=-5&currency=eur").await;
    let unknown = payments
        .charge(None, "amount=5&currency=eur&colour=red")
        .await;
    let currency = payments.charge(None, "amount=5&currency=EUR").await;

    assert_eq!(missing.status, 400);
    let missing = error(&missing);
    assert_eq!(missing.kind, "invalid_request_error");
    assert_eq!(missing.code.as_deref(), Some("parameter_missing"));
    assert_eq!(missing.param.as_deref(), Some("amount"));
    for (answer, code, param) in [
        (invalid, "parameter_invalid", "amount"),
        (unknown, "parameter_unknown", "colour"),
        (currency, "parameter_invalid", "currency"),
    ] {
        assert_eq!(answer.status, 400, "{}", answer.text);
        assert_eq!(error(&answer).code.as_deref(), Some(code));
        assert_eq!(error(&answer).param.as_deref(), Some(param));
    }
    let ledger = destination.ledger().await.unwrap();
    assert!(ledger.charges.is_empty() && ledger.declines.is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_declined_card_answers_402_and_records_a_decline_but_no_charge(pool: PgPool) {
    let (destination, payments) = start(pool, Config::payments()).await;

    let declined = payments
        .charge(None, "amount=500&currency=usd&customer=cus_declined")
        .await;
    let insufficient = payments
        .charge(None, "amount=500&currency=usd&customer=cus_insufficient")
        .await;

    assert_eq!((declined.status, insufficient.status), (402, 402));
    let declined = error(&declined);
    assert_eq!(declined.kind, "card_error");
    assert_eq!(declined.code.as_deref(), Some("card_declined"));
    assert_eq!(declined.decline_code.as_deref(), Some("generic_decline"));
    assert_eq!(declined.message, "Your card was declined.");
    let insufficient = error(&insufficient);
    assert_eq!(insufficient.code.as_deref(), Some("card_declined"));
    assert_eq!(
        insufficient.decline_code.as_deref(),
        Some("insufficient_funds")
    );
    let ledger = destination.ledger().await.unwrap();
    assert!(ledger.charges.is_empty());
    let codes: Vec<_> = ledger
        .declines
        .iter()
        .map(|d| d.decline_code.as_str())
        .collect();
    assert_eq!(codes, ["generic_decline", "insufficient_funds"]);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_wrong_api_key_answers_401_and_records_nothing(pool: PgPool) {
    let (destination, payments) = start(pool, Config::payments()).await;
    let form = b"amount=100&currency=eur";

    for authorization in [None, Some("Bearer sk_test_wrong"), Some(API_KEY)] {
        let headers: Vec<_> = authorization
            .map(|value| ("Authorization", value))
            .into_iter()
            .collect();
        let answer = payments
            .client
            .send_with(("POST", "/v1/charges"), FORM, &headers, form)
            .await
            .response();

        assert_eq!(answer.status, 401, "{authorization:?}");
        let error = error(&answer);
        assert_eq!(error.kind, "invalid_request_error");
        assert_eq!(error.code.as_deref(), Some("api_key_invalid"));
    }
    assert!(destination.ledger().await.unwrap().charges.is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_dropped_answer_still_leaves_the_charge_and_the_key_replays_it(pool: PgPool) {
    let (destination, payments) = start(pool, Config::payments()).await;
    let rule = FaultRule::new(
        Operation::Deliver,
        Match::ClientReference("w-11/pay-v1".into()),
        Fault::DropResponse {},
    )
    .times(1);
    destination.set_faults(FaultPlan::rules([rule])).unwrap();
    let form = "amount=4200&currency=eur&metadata[subject]=w-11/pay-v1";

    let dropped = payments
        .post("/v1/charges", Some("w-11/pay-v1"), form)
        .await;
    let ledger = destination.ledger().await.unwrap();
    let retried = payments.charge(Some("w-11/pay-v1"), form).await;

    assert!(
        matches!(dropped, Reply::ClosedWithoutResponse),
        "{dropped:?}"
    );
    let charges: Vec<_> = ledger.charges_for("w-11/pay-v1").collect();
    assert_eq!(charges.len(), 1);
    assert_eq!(retried.header("idempotent-replayed"), Some("true"));
    assert_eq!(retried.json::<Charge>().id, charges[0].id);
    assert_eq!(destination.ledger().await.unwrap().charges.len(), 1);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_500_after_the_commit_leaves_the_charge_and_promises_nothing(pool: PgPool) {
    let (destination, payments) = start(pool, Config::payments()).await;
    let rule = FaultRule::new(
        Operation::Deliver,
        Match::Any,
        Fault::ErrorAfterAccept { status: 500 },
    );
    destination.set_faults(FaultPlan::rules([rule])).unwrap();

    let answer = payments.charge(None, "amount=10&currency=eur").await;

    assert_eq!(answer.status, 500);
    let error = error(&answer);
    assert_eq!((error.kind.as_str(), error.code), ("api_error", None));
    assert_eq!(destination.ledger().await.unwrap().charges.len(), 1);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_refusal_answers_429_rate_limit_and_records_nothing(pool: PgPool) {
    let (destination, payments) = start(pool, Config::payments()).await;
    let rule = FaultRule::new(Operation::Deliver, Match::Any, Fault::Refuse {}).times(1);
    destination.set_faults(FaultPlan::rules([rule])).unwrap();

    let refused = payments
        .charge(Some("w-12/pay-v1"), "amount=10&currency=eur")
        .await;
    let retried = payments
        .charge(Some("w-12/pay-v1"), "amount=10&currency=eur")
        .await;

    assert_eq!(refused.status, 429);
    let error = error(&refused);
    assert_eq!(error.kind, "rate_limit_error");
    assert_eq!(error.code.as_deref(), Some("rate_limit"));
    // The refusal was not saved under the key: the retry is the first execution.
    assert_eq!(retried.status, 200);
    assert_eq!(retried.header("idempotent-replayed"), None);
    assert_eq!(destination.ledger().await.unwrap().charges.len(), 1);
}
