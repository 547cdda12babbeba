use std::time::{Duration, Instant};

use destinations::protocol::{Description, Supports, code};
use destinations::{
    Config, Effect, Fault, FaultPlan, FaultRule, Kind, Ledger, MIGRATOR, Match, Operation,
};
use serde_json::json;
use sqlx::PgPool;

use crate::client::{Reply, delivery, digest, start, start_with};

#[sqlx::test(migrator = "MIGRATOR")]
async fn malformed_requests_are_400s_with_a_message_never_500s(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Opaque).await;
    let valid = json!({
        "client_reference": "w-1", "digest": digest("x"), "recipient": "ada", "summary": "s",
    });
    let with = |field: &str, value: serde_json::Value| {
        let mut body = valid.clone();
        body[field] = value;
        body.to_string()
    };
    let bodies = [
        "{not json".to_owned(),
        String::new(),
        "[]".to_owned(),
        json!({"client_reference": "w-1"}).to_string(),
        with("digest", json!("sha256:not-hex")),
        with("digest", json!(42)),
        with("client_reference", json!("")),
        with("recipient", json!("r".repeat(201))),
        with("unexpected", json!(true)),
    ];

    for body in bodies {
        let answer = client
            .send("POST", "/deliveries", &[], &body)
            .await
            .response();

        assert_eq!(answer.status, 400, "{body}: {}", answer.body);
        assert_eq!(answer.code(), code::MALFORMED_REQUEST);
        assert!(!answer.body["message"].as_str().unwrap().is_empty());
        assert_eq!(answer.body["accepted"], false);
    }
    assert!(destination.ledger().await.unwrap().deliveries.is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn every_kind_describes_what_it_offers(pool: PgPool) {
    let expected = [
        (Kind::Idempotent, None, true, false),
        (Kind::Queryable, Some(1500), false, true),
        (Kind::Opaque, None, false, false),
    ];
    for (kind, visibility_window_ms, idempotency_key, lookup) in expected {
        let (_destination, client) = start(pool.clone(), kind).await;

        let description: Description = client.get("/").await.response().json();

        assert_eq!(
            description,
            Description {
                kind,
                visibility_window_ms,
                supports: Supports {
                    idempotency_key,
                    lookup,
                    withdrawal: true
                },
            }
        );
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_ledger_endpoint_shows_what_the_database_holds(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Idempotent).await;
    client
        .deliver(Some("k1"), &delivery("w-1", "one"))
        .await
        .response();
    client
        .deliver(Some("k2"), &delivery("w-2", "two"))
        .await
        .response();

    let served: Ledger = client.control("GET", "/ledger", "").await.response().json();

    assert_eq!(served, destination.ledger().await.unwrap());
    let references: Vec<_> = served
        .deliveries
        .iter()
        .map(|d| d.client_reference.as_str())
        .collect();
    assert_eq!(references, ["w-1", "w-2"]);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn destinations_sharing_a_database_keep_separate_ledgers(pool: PgPool) {
    let (first, first_client) = start_with(
        pool.clone(),
        Config {
            name: "first".into(),
            ..Config::new(Kind::Opaque)
        },
    )
    .await;
    let (second, _second_client) = start_with(
        pool,
        Config {
            name: "second".into(),
            ..Config::new(Kind::Opaque)
        },
    )
    .await;

    first_client
        .deliver(None, &delivery("w-1", "one"))
        .await
        .response();

    assert_eq!(first.ledger().await.unwrap().deliveries.len(), 1);
    assert!(second.ledger().await.unwrap().deliveries.is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_unknown_endpoint_answers_404_in_json(pool: PgPool) {
    let (_destination, client) = start(pool, Kind::Opaque).await;

    let answer = client.get("/nowhere").await.response();

    assert_eq!((answer.status, answer.code()), (404, code::NOT_FOUND));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn shutdown_lets_the_request_in_flight_finish_then_refuses_connections(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Opaque).await;
    let rule = FaultRule::new(
        Operation::Deliver,
        Match::Any,
        Fault::DelayResponse { ms: 300 },
    );
    destination.set_faults(FaultPlan::rules([rule])).unwrap();
    let mut effects = destination.effects();
    let addr = destination.addr();
    let sent = Instant::now();
    let in_flight =
        tokio::spawn(async move { client.deliver(None, &delivery("w-1", "one")).await });
    assert!(matches!(
        effects.recv().await.unwrap(),
        Effect::Delivered { .. }
    ));

    destination.shutdown().await.unwrap();

    let Reply::Response(answer) = in_flight.await.unwrap() else {
        panic!("the request in flight lost its answer");
    };
    assert_eq!(answer.status, 201);
    assert!(sent.elapsed() >= Duration::from_millis(300));
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}
