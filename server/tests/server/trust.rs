//! A claim production refuted permits nothing, wherever a person acts: the console's page, the
//! API, the command line and a bulk run all read the trusted contract (docs/DESIGN.md §5).

use engine::domain::{Claim, ContractKind, Role};
use http::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::api::{call, token};
use crate::console::{fixture_review_step, signed_in};

/// A step in review under an idempotent adapter whose key production then refuted.
async fn step_under_a_refuted_key(pool: &PgPool, creation_key: &str) -> Uuid {
    let step = fixture_review_step(pool, ContractKind::Idempotent, creation_key).await;
    let mut conn = pool.acquire().await.unwrap();
    let refuted = engine::store::adapter::refute_for_step(
        &mut conn,
        step,
        Claim::IdempotencyKey,
        "in production one request key was answered with 2 references (ch_1, ch_2)",
    )
    .await
    .unwrap();
    assert_eq!(refuted.as_deref(), Some("letters-idempotent"));
    step
}

async fn state_of(pool: &PgPool, step: Uuid) -> String {
    sqlx::query_scalar("select state::text from step where id = $1")
        .bind(step)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn before_the_refutation_the_same_key_retry_is_offered(pool: PgPool) {
    let step = fixture_review_step(&pool, ContractKind::Idempotent, "trusted-1").await;
    let secret = token(&pool, "runbook", Role::Operator, None).await;

    let (_, shown) = call(
        &pool,
        "GET",
        &format!("/api/v1/steps/{step}"),
        Some(&secret),
        None,
    )
    .await;

    assert!(
        shown["permitted"]
            .as_array()
            .unwrap()
            .contains(&json!("retry_same_key")),
        "{shown}"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_api_offers_no_same_key_retry_under_a_refuted_key_and_refuses_one(pool: PgPool) {
    let step = step_under_a_refuted_key(&pool, "refuted-api").await;
    let secret = token(&pool, "runbook", Role::Operator, None).await;

    let (status, shown) = call(
        &pool,
        "GET",
        &format!("/api/v1/steps/{step}"),
        Some(&secret),
        None,
    )
    .await;

    assert_eq!(status, StatusCode::OK, "{shown}");
    assert!(
        !shown["permitted"]
            .as_array()
            .unwrap()
            .contains(&json!("retry_same_key")),
        "{shown}"
    );
    let claims = shown["evidence"]["trust"]["claims"].as_array().unwrap();
    let key = claims
        .iter()
        .find(|c| c["claim"] == "idempotency_key")
        .expect("the key's claim is listed");
    assert_eq!(key["trust"], "refuted", "{key}");
    assert!(
        key["evidence"].as_str().unwrap().contains("ch_1, ch_2"),
        "{key}"
    );

    let (status, refused) = call(
        &pool,
        "POST",
        &format!("/api/v1/steps/{step}/actions/retry_same_key"),
        Some(&secret),
        Some(json!({"reason": "try again"}).to_string()),
    )
    .await;
    assert!(status.is_client_error(), "{status}: {refused}");
    assert_eq!(state_of(&pool, step).await, "review_required");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_console_draws_no_same_key_retry_under_a_refuted_key_and_says_why(pool: PgPool) {
    let step = step_under_a_refuted_key(&pool, "refuted-console").await;
    let mut browser = signed_in(&pool, Role::Approver).await;

    let (status, page) = browser.get(&format!("/steps/{step}")).await;

    assert_eq!(status, StatusCode::OK);
    assert!(!page.contains("Retry with the same key"), "{page}");
    assert!(
        page.contains("idempotency key: refuted"),
        "the page names the refuted claim"
    );
    assert!(page.contains("ch_1, ch_2"), "and its evidence");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_command_line_lists_the_refuted_claim_and_refuses_a_same_key_retry(pool: PgPool) {
    let step = step_under_a_refuted_key(&pool, "refuted-cli").await;
    engine::operators::add(&pool, "ana", Role::Approver)
        .await
        .unwrap();
    let id = step.to_string();
    let run = |args: Vec<&str>| {
        let pool = pool.clone();
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        async move {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let exit = server::ops::run_on(
                &pool,
                &refs,
                &mut server::ops::Io {
                    out: &mut out,
                    err: &mut err,
                },
            )
            .await
            .unwrap();
            (
                exit,
                String::from_utf8(out).unwrap(),
                String::from_utf8(err).unwrap(),
            )
        }
    };

    let (_, shown, _) = run(vec!["step", "show", &id, "--as", "ana"]).await;
    let (exit, _, refused) = run(vec![
        "step", "retry", &id, "--as", "ana", "--reason", "again",
    ])
    .await;

    assert!(
        shown.contains("idempotency key        refuted — in production one request key"),
        "{shown}"
    );
    assert!(!shown.contains("retry_same_key"), "{shown}");
    assert_eq!(exit, server::ops::Exit::Refused);
    assert!(refused.contains("is not permitted"), "{refused}");
    assert_eq!(state_of(&pool, step).await, "review_required");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_bulk_retry_refuses_a_step_under_a_refuted_key(pool: PgPool) {
    let step = step_under_a_refuted_key(&pool, "refuted-bulk").await;
    let secret = token(&pool, "night-shift", Role::Approver, None).await;
    let preview = json!({"action": "retry_same_key", "adapter": "letters-idempotent"});

    let (status, shown) = call(
        &pool,
        "POST",
        "/api/v1/bulk/preview",
        Some(&secret),
        Some(preview.to_string()),
    )
    .await;

    assert_eq!(status, StatusCode::OK, "{shown}");
    let rows: &Vec<Value> = shown["rows"].as_array().unwrap();
    let row = rows
        .iter()
        .find(|r| r["step_id"] == json!(step))
        .expect("the step is previewed");
    assert!(
        row["refusal"]
            .as_str()
            .is_some_and(|r| r.contains("not permitted")),
        "{shown}"
    );
}
