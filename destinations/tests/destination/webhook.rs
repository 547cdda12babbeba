//! The partner webhook receiver: it checks an HMAC signature and deduplicates nothing. Each
//! test asserts the receiver's own ledger.

use destinations::webhook::{Received, WebhookError, signature};
use destinations::{
    Config, Fault, FaultPlan, FaultRule, MIGRATOR, Match, Operation, RunningDestination, Secret,
};
use serde_json::json;
use sqlx::PgPool;

use crate::client::{Client, Reply};

const SECRET: &str = "whsec_partner_test_secret";

async fn start(pool: PgPool) -> (RunningDestination, Client) {
    let destination = destinations::spawn(pool, Config::webhook(Secret::new(SECRET)))
        .await
        .unwrap();
    let client = Client::new(&destination);
    (destination, client)
}

async fn post(client: &Client, body: &[u8], signature: Option<&str>) -> Reply {
    let headers: Vec<_> = signature
        .map(|value| ("X-Signature", value))
        .into_iter()
        .collect();
    let target = ("POST", "/webhooks/orders");
    client
        .send_with(target, "application/json", &headers, body)
        .await
}

fn signed(body: &[u8]) -> String {
    signature(&Secret::new(SECRET), body)
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_bad_signature_answers_401_and_records_nothing(pool: PgPool) {
    let (destination, client) = start(pool).await;
    let body = br#"{"subject": "w-1/notify-v1", "total": 12}"#;
    let other_secret = signature(&Secret::new("another secret"), body);
    let uppercase = signed(body).to_uppercase().replacen("SHA256", "sha256", 1);
    let tampered = signed(br#"{"subject": "w-1/notify-v1", "total": 13}"#);

    for presented in [
        None,
        Some(other_secret.as_str()),
        Some(uppercase.as_str()),
        Some(tampered.as_str()),
        Some("sha256=zz"),
    ] {
        let answer = post(&client, body, presented).await.response();

        assert_eq!(answer.status, 401, "{presented:?}");
        assert_eq!(
            answer.json::<WebhookError>().error,
            "invalid signature",
            "{presented:?}"
        );
    }
    assert!(destination.ledger().await.unwrap().events.is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_good_signature_records_the_event_as_sent(pool: PgPool) {
    let (destination, client) = start(pool).await;
    let body = br#"{"subject": "w-2/notify-v1", "total": 12}"#;

    let answer = post(&client, body, Some(&signed(body))).await.response();

    assert_eq!(answer.status, 200, "{}", answer.text);
    let received: Received = answer.json();
    assert!(received.received);
    assert!(received.id.starts_with("evt_") && received.id.len() == 28);
    let ledger = destination.ledger().await.unwrap();
    let events: Vec<_> = ledger.events_for("w-2/notify-v1").collect();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].id, received.id);
    assert_eq!(events[0].channel, "orders");
    assert_eq!(
        events[0].body,
        json!({"subject": "w-2/notify-v1", "total": 12})
    );
    assert!(events[0].signature_valid);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_same_body_twice_records_two_events(pool: PgPool) {
    let (destination, client) = start(pool).await;
    let body = br#"{"subject": "w-3/notify-v1"}"#;

    let first: Received = post(&client, body, Some(&signed(body)))
        .await
        .response()
        .json();
    let second: Received = post(&client, body, Some(&signed(body)))
        .await
        .response()
        .json();

    assert_ne!(first.id, second.id);
    assert_eq!(
        destination
            .ledger()
            .await
            .unwrap()
            .events_for("w-3/notify-v1")
            .count(),
        2
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_body_not_declared_json_answers_415_and_records_nothing(pool: PgPool) {
    let (destination, client) = start(pool).await;
    let body = b"subject=w-4";
    let headers = [("X-Signature", signed(body))];
    let headers: Vec<_> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();

    let answer = client
        .send_with(("POST", "/webhooks/orders"), "text/plain", &headers, body)
        .await
        .response();

    assert_eq!(answer.status, 415);
    assert!(destination.ledger().await.unwrap().events.is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_dropped_answer_still_records_the_event_of_its_subject(pool: PgPool) {
    let (destination, client) = start(pool).await;
    let rule = FaultRule::new(
        Operation::Deliver,
        Match::ClientReference("w-5/notify-v1".into()),
        Fault::DropResponse {},
    );
    destination.set_faults(FaultPlan::rules([rule])).unwrap();
    let dropped_body = br#"{"subject": "w-5/notify-v1"}"#;
    let spared_body = br#"{"subject": "w-6/notify-v1"}"#;

    let dropped = post(&client, dropped_body, Some(&signed(dropped_body))).await;
    let spared = post(&client, spared_body, Some(&signed(spared_body))).await;

    assert!(
        matches!(dropped, Reply::ClosedWithoutResponse),
        "{dropped:?}"
    );
    assert_eq!(spared.response().status, 200);
    let ledger = destination.ledger().await.unwrap();
    assert_eq!(ledger.events_for("w-5/notify-v1").count(), 1);
    assert_eq!(ledger.events_for("w-6/notify-v1").count(), 1);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_fault_on_an_endpoint_the_receiver_lacks_is_refused(pool: PgPool) {
    let (destination, _client) = start(pool).await;
    let rule = FaultRule::new(Operation::Withdraw, Match::Any, Fault::WithdrawalDrop {});

    let refused = destination.set_faults(FaultPlan::rules([rule]));

    assert!(refused.is_err(), "{refused:?}");
}
