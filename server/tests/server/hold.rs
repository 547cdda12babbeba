//! Holding and resuming an adapter through the API (docs/DESIGN.md §20): only an approver token
//! that may use the adapter, with a reason; the hold shows on the adapters listing and on a
//! step's evidence, and the audit log names the token.

use engine::domain::{ContractKind, Role};
use http::StatusCode;
use serde_json::json;
use sqlx::PgPool;

use crate::api::{call, token};
use crate::cli::z29c;
use crate::console::fixture_review_step;
use server::ops::Exit;

async fn post(
    pool: &PgPool,
    uri: &str,
    secret: &str,
    body: serde_json::Value,
) -> (StatusCode, serde_json::Value) {
    call(pool, "POST", uri, Some(secret), Some(body.to_string())).await
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_approver_token_holds_and_resumes_an_adapter_and_the_audit_log_names_it(pool: PgPool) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "hold-1").await;
    let secret = token(&pool, "oncall", Role::Approver, None).await;
    let uri = "/api/v1/adapters/letters-opaque/hold";
    let (status, held) = post(
        &pool,
        uri,
        &secret,
        json!({"reason": "provider incident 4411"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{held}");
    assert_eq!(held["held_by"], "token:oncall");
    assert_eq!(held["holds_lookups"], true);

    let (status, again) = post(&pool, uri, &secret, json!({"reason": "twice"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");

    let (_, listed) = call(&pool, "GET", "/api/v1/adapters", Some(&secret), None).await;
    let letters = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "letters-opaque")
        .unwrap();
    assert_eq!(
        letters["held"]["reason"], "provider incident 4411",
        "{letters}"
    );
    let (_, shown) = call(
        &pool,
        "GET",
        &format!("/api/v1/steps/{step}"),
        Some(&secret),
        None,
    )
    .await;
    let trust = shown["trust"].as_str().unwrap_or_default();
    assert!(
        trust.starts_with("Held: sending is paused by token:oncall"),
        "{shown}"
    );

    let text = crate::support::scrape_metrics(&pool).await;
    assert!(
        text.contains("z29c_adapter_held{adapter=\"letters-opaque\"} 1"),
        "{text}"
    );

    let resume = "/api/v1/adapters/letters-opaque/resume";
    let (status, resumed) = post(
        &pool,
        resume,
        &secret,
        json!({"reason": "fixed", "per_second": 5}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    assert_eq!(resumed["ended"]["reason"], "provider incident 4411");
    let actors: Vec<(String, String)> =
        sqlx::query_as("select actor, action from audit where action like 'adapter_%' order by id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        actors,
        [
            ("oncall".to_owned(), "adapter_hold".to_owned()),
            ("oncall".to_owned(), "adapter_resume".to_owned())
        ]
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_hold_is_refused_to_operators_prefixed_tokens_other_adapters_and_no_reason(pool: PgPool) {
    fixture_review_step(&pool, ContractKind::Opaque, "hold-2").await;
    let uri = "/api/v1/adapters/letters-opaque/hold";
    let body = json!({"reason": "outage"});
    let operator = token(&pool, "desk", Role::Operator, None).await;
    assert_eq!(
        post(&pool, uri, &operator, body.clone()).await.0,
        StatusCode::FORBIDDEN
    );
    let prefixed = token(&pool, "shop", Role::Approver, Some("shop-")).await;
    assert_eq!(
        post(&pool, uri, &prefixed, body.clone()).await.0,
        StatusCode::FORBIDDEN
    );
    let mail_only =
        crate::adapter_scope::limited(&pool, "mailer", Role::Approver, false, &["mail"]).await;
    assert_eq!(
        post(&pool, uri, &mail_only, body.clone()).await.0,
        StatusCode::FORBIDDEN
    );
    let approver = token(&pool, "oncall", Role::Approver, None).await;
    let (status, refused) = post(&pool, uri, &approver, json!({"reason": " "})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    let (status, _) = post(&pool, "/api/v1/adapters/nobody/hold", &approver, body).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let held: i64 = sqlx::query_scalar("select count(*) from adapter where held_at is not null")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(held, 0, "nothing was held");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_command_line_holds_and_resumes_as_the_approver_it_names(pool: PgPool) {
    fixture_review_step(&pool, ContractKind::Opaque, "hold-3").await;
    engine::operators::add(&pool, "ana", Role::Approver)
        .await
        .unwrap();
    engine::operators::add(&pool, "olga", Role::Operator)
        .await
        .unwrap();
    let hold = |who: &'static str| {
        [
            "hold",
            "letters-opaque",
            "--as",
            who,
            "--reason",
            "provider outage",
            "--lookups-go",
        ]
    };
    let refused = z29c(&pool, &hold("olga")).await;
    assert_eq!(refused.exit, Exit::Refused, "{}", refused.out);
    assert!(
        refused.err.contains("needs the approver role"),
        "{}",
        refused.err
    );

    let held = z29c(&pool, &hold("ana")).await;
    assert_eq!(held.exit, Exit::Done, "{}", held.err);
    assert!(held.out.contains("though lookups still go"), "{}", held.out);
    let resumed = z29c(
        &pool,
        &[
            "resume",
            "letters-opaque",
            "--as",
            "ana",
            "--reason",
            "back",
            "--json",
        ],
    )
    .await;
    assert_eq!(resumed.exit, Exit::Done, "{}", resumed.err);
    let answer: serde_json::Value = serde_json::from_str(&resumed.out).unwrap();
    assert_eq!(answer["ended"]["held_by"], "ana");
    assert_eq!(answer["ended"]["holds_lookups"], false);
    assert_eq!(answer["released"], 0);
}
