//! The operations API beyond the decision table: stale protection by `If-Match`, tokens that
//! see only their prefix, refusals of malformed input with a stable code, workflow search and
//! cancel, the queue, the audit log naming the token, and the OpenAPI document covering the
//! router.

use axum::body::Body;
use engine::domain::{ContractKind, Role};
use http::{Request, StatusCode, header};
use serde_json::{Value, json};
use sqlx::PgPool;
use tower::ServiceExt;
use uuid::Uuid;

use crate::api::{call, token};
use crate::console::{fixture_review_step, workflow_of};
use crate::support::app;

/// `POST uri` with `body`, bearer `secret` and, when given, `If-Match: version`.
pub(crate) async fn post_if_match(
    pool: &PgPool,
    uri: &str,
    secret: &str,
    version: Option<&str>,
    body: Value,
) -> (StatusCode, Value) {
    let mut request = Request::post(uri)
        .header(header::AUTHORIZATION, format!("Bearer {secret}"))
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(v) = version {
        request = request.header(header::IF_MATCH, v);
    }
    let response = app(pool.clone())
        .oneshot(request.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn state_of(pool: &PgPool, step: Uuid) -> String {
    sqlx::query_scalar("select state::text from step where id = $1")
        .bind(step)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_action_with_an_old_version_in_if_match_answers_412_and_changes_nothing(pool: PgPool) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "stale-1").await;
    let secret = token(&pool, "runbook", Role::Approver, None).await;
    let (status, shown) = call(
        &pool,
        "GET",
        &format!("/api/v1/steps/{step}"),
        Some(&secret),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    let version = shown["version"].as_str().unwrap().to_owned();
    assert!(
        shown["permitted"]
            .as_array()
            .unwrap()
            .contains(&json!("waive")),
        "{shown}"
    );
    let old: i64 = version.parse::<i64>().unwrap() - 1;

    let uri = format!("/api/v1/steps/{step}/actions/waive");
    let body = json!({"reason": "from an old read", "residual_uncertainty": "may have been sent"});
    let (status, answer) = post_if_match(
        &pool,
        &uri,
        &secret,
        Some(&format!("\"{old}\"")),
        body.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED, "{answer}");
    assert_eq!(answer["code"], "stale");
    assert!(
        answer["error"].as_str().unwrap().contains("changed since"),
        "{answer}"
    );
    assert_eq!(state_of(&pool, step).await, "review_required");

    // A weak tag promises only an equivalent step: an action needs the very one read.
    let (status, answer) = post_if_match(
        &pool,
        &uri,
        &secret,
        Some(&format!("W/\"{version}\"")),
        body.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("strong ETag"),
        "{answer}"
    );
    assert_eq!(state_of(&pool, step).await, "review_required");

    let (status, answer) =
        post_if_match(&pool, &uri, &secret, Some(&format!("\"{version}\"")), body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(state_of(&pool, step).await, "waived");
    let (actor, kind): (String, String) = sqlx::query_as(
        "select actor, actor_kind from audit where step_id = $1 and action = 'waive'",
    )
    .bind(step)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((actor.as_str(), kind.as_str()), ("runbook", "api"));
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_prefixed_token_neither_sees_nor_acts_on_another_prefix_s_steps(pool: PgPool) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "team-b/1").await;
    let secret = token(&pool, "team-a", Role::Approver, Some("team-a/")).await;
    let (status, answer) = call(
        &pool,
        "GET",
        &format!("/api/v1/steps/{step}"),
        Some(&secret),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    let (status, answer) = post_if_match(
        &pool,
        &format!("/api/v1/steps/{step}/actions/cancel"),
        &secret,
        None,
        json!({"reason": "not ours"}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert_eq!(state_of(&pool, step).await, "review_required");
    let (status, page) = call(&pool, "GET", "/api/v1/workflows", Some(&secret), None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page["workflows"].as_array().unwrap().is_empty(), "{page}");
    let (status, answer) = call(&pool, "GET", "/api/v1/audit", Some(&secret), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_prefixed_tokens_queue_pages_through_its_own_steps_and_its_cursor_names_no_other(
    pool: PgPool,
) {
    let mut others = Vec::new();
    for key in ["other-1", "other-2", "other-3"] {
        others.push(fixture_review_step(&pool, ContractKind::Opaque, key).await);
    }
    let own = fixture_review_step(&pool, ContractKind::Opaque, "shop-1").await;
    let shop = token(&pool, "shop", Role::Viewer, Some("shop-")).await;
    let mut seen = Vec::new();
    let mut uri = "/api/v1/queue?limit=1".to_owned();
    for _ in 0..5 {
        let (status, page) = call(&pool, "GET", &uri, Some(&shop), None).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        for row in page["rows"].as_array().unwrap() {
            seen.push(row["step_id"].as_str().unwrap().to_owned());
        }
        let Some(next) = page["next"].as_str() else {
            break;
        };
        for other in &others {
            assert!(
                !next.contains(&other.to_string()),
                "{next} names another team's step"
            );
        }
        uri = format!("/api/v1/queue?limit=1&after={next}");
    }
    assert_eq!(seen, vec![own.to_string()]);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn malformed_action_requests_are_refused_with_a_sentence_and_a_code_and_change_nothing(
    pool: PgPool,
) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "bad-1").await;
    let secret = token(&pool, "script", Role::Approver, None).await;
    let uri = |action: &str| format!("/api/v1/steps/{step}/actions/{action}");
    for (uri, version, body, status, code) in [
        (
            uri("waive"),
            None,
            json!({"reason": "x", "residual": "typo"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
        ),
        (
            uri("waive"),
            None,
            json!({"reason": 7}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
        ),
        (
            uri("waive"),
            None,
            json!({"reason": "x", "evidence": "wrong action"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
        ),
        (
            uri("waive"),
            None,
            json!({"reason": " ", "residual_uncertainty": "y"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
        ),
        (
            uri("waive"),
            Some("yesterday"),
            json!({"reason": "x", "residual_uncertainty": "y"}),
            StatusCode::BAD_REQUEST,
            "malformed",
        ),
        (
            uri("teleport"),
            None,
            json!({"reason": "x"}),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            uri("authorize_another_attempt"),
            None,
            json!({"reason": "x"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
        ),
        (
            uri("retry_same_key"),
            None,
            json!({"reason": "x"}),
            StatusCode::CONFLICT,
            "not_permitted",
        ),
        (
            format!("/api/v1/steps/{}/actions/cancel", Uuid::now_v7()),
            None,
            json!({"reason": "x"}),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/api/v1/steps/not-a-uuid/actions/cancel".to_owned(),
            None,
            json!({"reason": "x"}),
            StatusCode::BAD_REQUEST,
            "malformed",
        ),
    ] {
        let (got, answer) = post_if_match(&pool, &uri, &secret, version, body.clone()).await;
        assert_eq!(got, status, "{uri} {body}: {answer}");
        assert_eq!(answer["code"], code, "{uri} {body}: {answer}");
        assert!(
            !answer["error"].as_str().unwrap_or_default().is_empty(),
            "{answer}"
        );
    }
    assert_eq!(state_of(&pool, step).await, "review_required");
    let audited: i64 = sqlx::query_scalar("select count(*) from audit where step_id = $1")
        .bind(step)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(audited, 0);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn workflows_are_listed_newest_first_a_page_at_a_time_and_searched_by_key(pool: PgPool) {
    let mut steps = Vec::new();
    for n in 0..5 {
        steps.push(fixture_review_step(&pool, ContractKind::Opaque, &format!("list-{n}")).await);
    }
    let secret = token(&pool, "lister", Role::Viewer, None).await;
    let (status, first) = call(
        &pool,
        "GET",
        "/api/v1/workflows?limit=2",
        Some(&secret),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let keys = |page: &Value| -> Vec<String> {
        page["workflows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["creation_key"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(keys(&first), ["list-4", "list-3"]);
    let next = first["next"].as_str().unwrap();
    let (_, second) = call(
        &pool,
        "GET",
        &format!("/api/v1/workflows?limit=2&after={next}"),
        Some(&secret),
        None,
    )
    .await;
    assert_eq!(keys(&second), ["list-2", "list-1"]);
    let (_, found) = call(
        &pool,
        "GET",
        "/api/v1/workflows?creation_key=list-3&state=running",
        Some(&secret),
        None,
    )
    .await;
    assert_eq!(keys(&found), ["list-3"], "{found}");
    let (_, none) = call(
        &pool,
        "GET",
        "/api/v1/workflows?state=completed",
        Some(&secret),
        None,
    )
    .await;
    assert!(keys(&none).is_empty(), "{none}");
    let (_, by_adapter) = call(
        &pool,
        "GET",
        "/api/v1/workflows?adapter=letters-opaque&definition=document_delivery",
        Some(&secret),
        None,
    )
    .await;
    assert_eq!(keys(&by_adapter).len(), 5, "{by_adapter}");
    let (status, refused) = call(
        &pool,
        "GET",
        "/api/v1/workflows?colour=blue",
        Some(&secret),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("colour"),
        "{refused}"
    );
    let (status, refused) = call(
        &pool,
        "GET",
        "/api/v1/workflows?limit=0",
        Some(&secret),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn cancelling_a_workflow_cancels_its_steps_and_a_second_cancel_is_refused(pool: PgPool) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "cancel-1").await;
    let workflow = workflow_of(&pool, step).await;
    let operator = token(&pool, "op", Role::Operator, None).await;
    let approver = token(&pool, "boss", Role::Approver, None).await;
    let uri = format!("/api/v1/workflows/{workflow}/cancel");
    let (status, answer) =
        post_if_match(&pool, &uri, &operator, None, json!({"reason": "no"})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    let (status, answer) = post_if_match(
        &pool,
        &uri,
        &approver,
        None,
        json!({"reason": "customer withdrew"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(state_of(&pool, step).await, "cancelled");
    let (status, answer) =
        post_if_match(&pool, &uri, &approver, None, json!({"reason": "again"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    let (_, shown) = call(
        &pool,
        "GET",
        &format!("/api/v1/workflows/{workflow}"),
        Some(&approver),
        None,
    )
    .await;
    assert_eq!(shown["state"], "cancelled", "{shown}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_queue_lists_steps_under_review_with_counts_and_the_audit_log_names_the_token(
    pool: PgPool,
) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "queue-1").await;
    fixture_review_step(&pool, ContractKind::Idempotent, "queue-2").await;
    let secret = token(&pool, "dashboard", Role::Approver, None).await;
    let (status, queue) = call(
        &pool,
        "GET",
        "/api/v1/queue?adapter=letters-opaque",
        Some(&secret),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{queue}");
    let rows = queue["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{queue}");
    assert_eq!(rows[0]["step_id"], step.to_string());
    assert!(queue["counts"].is_object(), "{queue}");
    post_if_match(
        &pool,
        &format!("/api/v1/steps/{step}/actions/cancel"),
        &secret,
        None,
        json!({"reason": "by script"}),
    )
    .await;
    let (status, log) = call(
        &pool,
        "GET",
        "/api/v1/audit?actor=dashboard",
        Some(&secret),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{log}");
    let entry = &log["entries"][0];
    assert_eq!(entry["action"], "cancel", "{log}");
    assert_eq!(entry["actor_kind"], "api", "{log}");
    assert_eq!(entry["step"], step.to_string(), "{log}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn every_path_in_the_openapi_document_is_routed(pool: PgPool) {
    let (status, document) = call(&pool, "GET", "/api/v1/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let paths = document["paths"].as_object().unwrap();
    assert!(paths.len() >= 17, "{}", paths.len());
    for (path, operations) in paths {
        let concrete = path
            .replace("{id}", &Uuid::now_v7().to_string())
            .replace("{action}", "cancel")
            .replace("{name}", "x")
            .replace("{version}", "1");
        for method in operations.as_object().unwrap().keys() {
            let (status, answer) = call(&pool, &method.to_uppercase(), &concrete, None, None).await;
            // Unauthenticated: every routed operation answers 401, never the catch-all's 404.
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{method} {path}: {answer}"
            );
        }
    }
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_reference_api_table_lists_every_operation_of_the_openapi_document(pool: PgPool) {
    let reference = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/reference/http-api.md"
    ))
    .unwrap();
    let (_, document) = call(&pool, "GET", "/api/v1/openapi.json", None, None).await;
    let mut missing = Vec::new();
    for (path, operations) in document["paths"].as_object().unwrap() {
        for method in operations.as_object().unwrap().keys() {
            let row = format!("| `{} {path}", method.to_uppercase());
            if !reference.contains(&row) {
                missing.push(row);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/reference/http-api.md's table lacks: {missing:?}"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_bulk_run_a_token_starts_acts_on_the_previewed_rows_and_is_audited_as_the_api(
    pool: PgPool,
) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "bulk-1").await;
    let secret = token(&pool, "night-shift", Role::Approver, None).await;
    let preview = json!({"action": "cancel", "adapter": "letters-opaque"});
    let (status, shown) =
        post_if_match(&pool, "/api/v1/bulk/preview", &secret, None, preview).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    let rows = shown["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{shown}");
    assert!(rows[0]["refusal"].is_null(), "{shown}");
    let start = json!({
        "action": "cancel",
        "reason": "the partner withdrew every order",
        "rate_per_sec": 50,
        "rows": [{"step": rows[0]["step_id"], "version": rows[0]["version"]}],
    });
    let (status, started) = post_if_match(&pool, "/api/v1/bulk", &secret, None, start).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let run = started["id"].as_str().unwrap().to_owned();
    let mut progress = Value::Null;
    for _ in 0..100 {
        (_, progress) = call(
            &pool,
            "GET",
            &format!("/api/v1/bulk/{run}"),
            Some(&secret),
            None,
        )
        .await;
        if !progress["finished_at"].is_null() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        !progress["finished_at"].is_null(),
        "the run did not finish: {progress}"
    );
    assert_eq!(state_of(&pool, step).await, "cancelled");
    let (actor, kind): (String, String) = sqlx::query_as(
        "select actor, actor_kind from audit where step_id = $1 and action = 'cancel'",
    )
    .bind(step)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((actor.as_str(), kind.as_str()), ("night-shift", "api"));
}
