//! The payments destination, in the style of Stripe's API: each test asserts the destination's
//! own ledger, not only what the client was told.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use destinations::payments::{Charge, ErrorBody, KEY_IN_USE_MESSAGE, Refund, SearchResult};
use destinations::{
    Config, Fault, FaultPlan, FaultRule, MIGRATOR, ManualClock, Match, Operation,
    RunningDestination, Secret,
};
use sqlx::PgPool;
use tokio::sync::Barrier;

use crate::client::{Client, Reply, Response};

const API_KEY: &str = "sk_test_4eC39HqLyjWDarjtT1zdp7dc";
const FORM: &str = "application/x-www-form-urlencoded";

/// Talks to a payments destination with its API key.
#[derive(Clone, Copy)]
struct Payments {
    client: Client,
    authorization: &'static str,
}

impl Payments {
    async fn post(&self, path: &str, key: Option<&str>, form: &str) -> Reply {
        let mut headers = vec![("Authorization", self.authorization)];
        headers.extend(key.map(|key| ("Idempotency-Key", key)));
        let target = ("POST", path);
        self.client
            .send_with(target, FORM, &headers, form.as_bytes())
            .await
    }

    async fn charge(&self, key: Option<&str>, form: &str) -> Response {
        self.post("/v1/charges", key, form).await.response()
    }

    async fn refund(&self, key: Option<&str>, form: &str) -> Response {
        self.post("/v1/refunds", key, form).await.response()
    }

    async fn get(&self, path: &str) -> Response {
        let headers = [("Authorization", self.authorization)];
        self.client
            .send_with(("GET", path), FORM, &headers, b"")
            .await
            .response()
    }
}

async fn start(pool: PgPool, config: Config) -> (RunningDestination, Payments) {
    let config = Config {
        api_key: Some(Secret::new(API_KEY)),
        ..config
    };
    let destination = destinations::spawn(pool, config).await.unwrap();
    let payments = Payments {
        client: Client::new(&destination),
        authorization: String::leak(format!("Bearer {API_KEY}")),
    };
    (destination, payments)
}

fn error(response: &Response) -> destinations::payments::ErrorDetail {
    response.json::<ErrorBody>().error
}

fn manual_clock() -> ManualClock {
    ManualClock::starting_at(Utc.with_ymd_and_hms(2026, 12, 2, 9, 0, 0).unwrap())
}

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
