//! Who may reach what: the test-only endpoints need the control token the destination was
//! started with, and a body is read only when it is declared JSON, so a cross-site form or
//! `text/plain` post commits nothing.

use destinations::{Kind, MIGRATOR};
use serde_json::json;
use sqlx::PgPool;

use crate::client::{delivery, start};

/// Every test-only endpoint, with a body it accepts.
const TEST_ONLY: [(&str, &str, &str); 5] = [
    ("GET", "/ledger", ""),
    ("GET", "/control/faults", ""),
    ("PUT", "/control/faults", r#"{"rules": [], "random": null}"#),
    ("DELETE", "/control/faults", ""),
    ("GET", "/control/anything-else", ""),
];

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_test_only_endpoints_refuse_a_request_without_the_control_token(pool: PgPool) {
    let (_destination, client) = start(pool, Kind::Opaque).await;
    for (method, path, body) in TEST_ONLY {
        for authorization in [None, Some("Bearer not-the-token"), Some("not-bearer")] {
            let headers: Vec<_> = authorization
                .map(|value| ("Authorization", value))
                .into_iter()
                .collect();
            let answer = client.send(method, path, &headers, body).await.response();

            assert_eq!(answer.status, 401, "{method} {path} {authorization:?}");
            assert_eq!(answer.code(), "control_token_required");
            assert!(
                answer.body["message"]
                    .as_str()
                    .unwrap()
                    .contains("Authorization: Bearer"),
                "{}",
                answer.body
            );
        }
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_test_only_endpoints_answer_with_the_control_token(pool: PgPool) {
    let (_destination, client) = start(pool, Kind::Opaque).await;
    let answers: Vec<u16> = control_statuses(&client).await;
    assert_eq!(answers, [200, 200, 200, 204, 404]);
}

async fn control_statuses(client: &crate::client::Client) -> Vec<u16> {
    let mut statuses = Vec::new();
    for (method, path, body) in TEST_ONLY {
        statuses.push(client.control(method, path, body).await.response().status);
    }
    statuses
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_delivery_posted_as_text_plain_is_refused_415_and_commits_nothing(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Opaque).await;
    let body = serde_json::to_string(&delivery("w-1/deliver-v1", "letter")).unwrap();
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
    ] {
        let answer = client
            .send_as("POST", "/deliveries", content_type, &body)
            .await
            .response();

        assert_eq!(answer.status, 415, "{content_type}");
        assert!(
            answer.body["message"]
                .as_str()
                .unwrap()
                .contains("Content-Type: application/json"),
            "{}",
            answer.body
        );
        assert_eq!(answer.body["accepted"], json!(false));
    }
    let plan = r#"{"rules": [], "random": null}"#;
    let answer = client
        .send_as("PUT", "/control/faults", "text/plain", plan)
        .await
        .response();
    assert_eq!(answer.status, 401, "the token is checked before the body");
    assert!(destination.ledger().await.unwrap().deliveries.is_empty());
    let accepted = client
        .send_as(
            "POST",
            "/deliveries",
            "application/json; charset=utf-8",
            &body,
        )
        .await
        .response();
    assert_eq!(accepted.status, 201, "{}", accepted.body);
}
