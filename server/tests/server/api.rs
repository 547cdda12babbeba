//! The `/api/v1` surface: idempotent creation, clear refusals, bearer tokens.

use axum::body::Body;
use http::{Request, StatusCode, header};
use serde_json::{Value, json};
use sqlx::PgPool;
use tower::ServiceExt;

use engine::domain::Role;
use engine::store::journal::Actor;
use engine::store::token::NewToken;

use crate::support::app;

async fn setup(pool: &PgPool) -> String {
    crate::support::shipped(pool).await;
    let contract = engine::adapter::contracts::declared(
        engine::domain::ContractKind::Idempotent,
        2_000,
        0,
        false,
    );
    engine::adapter::apply::register_trusted(pool, "docs", "http://127.0.0.1:9", &contract)
        .await
        .unwrap();
    token(pool, "test-client", Role::Operator, None).await
}

/// A new token named `name` with `role`, scoped to `prefix` when given.
pub(crate) async fn token(pool: &PgPool, name: &str, role: Role, prefix: Option<&str>) -> String {
    let new = NewToken {
        name,
        role,
        creation_key_prefix: prefix,
        may_configure: false,
        adapters: None,
        on_behalf_of: None,
    };
    engine::store::token::create(pool, &new, Actor::Engine("test"))
        .await
        .unwrap()
}

pub(crate) async fn call(
    pool: &PgPool,
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: Option<String>,
) -> (StatusCode, Value) {
    let app = app(pool.clone());
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    if body.is_some() {
        request = request.header(header::CONTENT_TYPE, "application/json");
    }
    let response = app
        .oneshot(
            request
                .body(body.map(Body::from).unwrap_or_default())
                .unwrap(),
        )
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

fn start_body(key: &str, title: &str) -> String {
    json!({
        "creation_key": key,
        "definition": "document_delivery",
        "input": { "adapter": "docs", "recipient": "r-1", "document": { "title": title, "body": "hello" } }
    })
    .to_string()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn starting_twice_with_the_same_key_and_input_returns_the_same_workflow(pool: PgPool) {
    let token = setup(&pool).await;
    let (status, first) = call(
        &pool,
        "POST",
        "/api/v1/workflows",
        Some(&token),
        Some(start_body("k-1", "Report")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(
        first["status"],
        "Request recorded; delivery has not started"
    );
    assert_eq!(first["steps"].as_array().unwrap().len(), 3);

    let (status, again) = call(
        &pool,
        "POST",
        "/api/v1/workflows",
        Some(&token),
        Some(start_body("k-1", "Report")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again["id"], first["id"]);
    let count: i64 = sqlx::query_scalar("select count(*) from workflow")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_same_key_with_another_input_is_a_conflict_that_changes_nothing(pool: PgPool) {
    let token = setup(&pool).await;
    call(
        &pool,
        "POST",
        "/api/v1/workflows",
        Some(&token),
        Some(start_body("k-1", "Report")),
    )
    .await;
    let (status, body) = call(
        &pool,
        "POST",
        "/api/v1/workflows",
        Some(&token),
        Some(start_body("k-1", "Other")),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("creation key `k-1`"),
        "{body}"
    );
    let titles: Vec<String> =
        sqlx::query_scalar("select input->'document'->>'title' from workflow")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(titles, vec!["Report".to_owned()]);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn starting_work_commits_intent_steps_outbox_and_audit_together(pool: PgPool) {
    let token = setup(&pool).await;
    let (_, body) = call(
        &pool,
        "POST",
        "/api/v1/workflows",
        Some(&token),
        Some(start_body("k-2", "Report")),
    )
    .await;
    let id: uuid::Uuid = body["id"].as_str().unwrap().parse().unwrap();
    let states: Vec<(String, String)> = sqlx::query_as(
        "select logical, state::text from step where workflow_id = $1 order by created_at, id",
    )
    .bind(id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        states,
        vec![
            ("render".into(), "succeeded".into()),
            ("deliver".into(), "ready".into()),
            ("notify".into(), "blocked".into())
        ],
        "the pure step that depends on nothing is settled with its workflow's start"
    );
    let events: Vec<String> =
        sqlx::query_scalar("select kind from outbox where workflow_id = $1 order by revision")
            .bind(id)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        events,
        [
            "workflow.started",
            "step.succeeded",
            "workflow.state_changed"
        ]
    );
    let actor: String = sqlx::query_scalar("select actor from audit where workflow_id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(actor, "test-client");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn malformed_bodies_get_a_4xx_that_says_what_is_wrong(pool: PgPool) {
    let token = setup(&pool).await;
    let cases = [
        ("{not json", StatusCode::BAD_REQUEST),
        (r#"{"creation_key": "k"}"#, StatusCode::UNPROCESSABLE_ENTITY),
        (
            &start_body("k", "T").replace("docs", "nope"),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            &start_body("k", "").to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (&start_body("", "T"), StatusCode::UNPROCESSABLE_ENTITY),
        (
            &start_body("k", "nul \u{0}"),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (&start_body("k\u{0}", "T"), StatusCode::UNPROCESSABLE_ENTITY),
    ];
    for (body, expected) in cases {
        let (status, answer) = call(
            &pool,
            "POST",
            "/api/v1/workflows",
            Some(&token),
            Some(body.to_owned()),
        )
        .await;
        assert_eq!(status, expected, "{body} → {answer}");
        assert!(
            !answer["error"].as_str().unwrap_or_default().is_empty(),
            "{body} → {answer}"
        );
    }
    let huge = start_body("k", &"x".repeat(server::http::api::MAX_BODY_BYTES));
    let (status, answer) = call(&pool, "POST", "/api/v1/workflows", Some(&token), Some(huge)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
    let count: i64 = sqlx::query_scalar("select count(*) from workflow")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 0, "a refused request recorded a workflow");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_api_refuses_requests_without_a_valid_token(pool: PgPool) {
    setup(&pool).await;
    for token in [None, Some("z29c_forged")] {
        let (status, body) = call(
            &pool,
            "POST",
            "/api/v1/workflows",
            token,
            Some(start_body("k", "T")),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(body["error"].as_str().unwrap().contains("Bearer"));
    }
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn reading_a_workflow_answers_its_projection_or_a_clear_404(pool: PgPool) {
    let token = setup(&pool).await;
    let (_, created) = call(
        &pool,
        "POST",
        "/api/v1/workflows",
        Some(&token),
        Some(start_body("k", "T")),
    )
    .await;
    let uri = format!("/api/v1/workflows/{}", created["id"].as_str().unwrap());
    let (status, body) = call(&pool, "GET", &uri, Some(&token), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["creation_key"], "k");
    let (status, _) = call(
        &pool,
        "GET",
        "/api/v1/workflows/not-a-uuid",
        Some(&token),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = call(
        &pool,
        "GET",
        &format!("/api/v1/workflows/{}", uuid::Uuid::nil()),
        Some(&token),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_openapi_document_describes_every_route(pool: PgPool) {
    let (status, doc) = call(&pool, "GET", "/api/v1/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        doc["paths"]["/api/v1/workflows"]["post"].is_object(),
        "{doc}"
    );
    assert!(
        doc["paths"]["/api/v1/workflows/{id}"]["get"].is_object(),
        "{doc}"
    );
    assert!(
        doc["components"]["schemas"]["WorkflowStatus"].is_object(),
        "{doc}"
    );
}

async fn workflow_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from workflow")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_viewer_token_reads_status_but_its_start_is_refused_403_in_words(pool: PgPool) {
    let operator = setup(&pool).await;
    let viewer = token(&pool, "dashboard", Role::Viewer, None).await;
    let (status, body) = call(
        &pool,
        "POST",
        "/api/v1/workflows",
        Some(&viewer),
        Some(start_body("v-1", "Report")),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("may read workflow status but not start"),
        "{body}"
    );
    assert_eq!(workflow_count(&pool).await, 0);

    let (_, created) = call(
        &pool,
        "POST",
        "/api/v1/workflows",
        Some(&operator),
        Some(start_body("v-2", "Report")),
    )
    .await;
    let uri = format!("/api/v1/workflows/{}", created["id"].as_str().unwrap());
    let (status, read) = call(&pool, "GET", &uri, Some(&viewer), None).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["creation_key"], "v-2");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_prefixed_token_neither_sees_nor_starts_workflows_outside_its_prefix(pool: PgPool) {
    setup(&pool).await;
    let billing = token(&pool, "billing", Role::Operator, Some("billing-")).await;
    let letters = token(&pool, "letters", Role::Operator, Some("letters-")).await;
    let (status, theirs) = call(
        &pool,
        "POST",
        "/api/v1/workflows",
        Some(&letters),
        Some(start_body("letters-1", "Letter")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{theirs}");

    let uri = format!("/api/v1/workflows/{}", theirs["id"].as_str().unwrap());
    let (status, body) = call(&pool, "GET", &uri, Some(&billing), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let missing = format!("/api/v1/workflows/{}", uuid::Uuid::now_v7());
    let (_, absent) = call(&pool, "GET", &missing, Some(&billing), None).await;
    assert_eq!(
        body["error"].as_str().unwrap().replace(&uri[18..], ""),
        absent["error"]
            .as_str()
            .unwrap()
            .replace(&missing[18..], ""),
        "another prefix's workflow must look exactly like a missing one"
    );

    let (status, body) = call(
        &pool,
        "POST",
        "/api/v1/workflows",
        Some(&billing),
        Some(start_body("letters-2", "Letter")),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("creation key starts with `billing-`"),
        "{body}"
    );
    // Not even the same key and input as an existing workflow lets it learn that one exists.
    let (status, _) = call(
        &pool,
        "POST",
        "/api/v1/workflows",
        Some(&billing),
        Some(start_body("letters-1", "Letter")),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(workflow_count(&pool).await, 1);

    let (status, own) = call(
        &pool,
        "POST",
        "/api/v1/workflows",
        Some(&billing),
        Some(start_body("billing-1", "Invoice")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{own}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_revoked_token_is_refused_401_and_its_revocation_is_audited(pool: PgPool) {
    let secret = setup(&pool).await;
    engine::store::token::revoke(&pool, "test-client", Actor::Engine("test"))
        .await
        .unwrap();
    let (status, body) = call(
        &pool,
        "POST",
        "/api/v1/workflows",
        Some(&secret),
        Some(start_body("r-1", "Report")),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body["error"].as_str().unwrap().contains("Bearer"), "{body}");
    let actions: Vec<String> = sqlx::query_scalar(
        "select action from audit where details->>'token' = 'test-client' order by id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(actions, ["token_create", "token_revoke"]);
    let listed = engine::store::token::list(&pool).await.unwrap();
    assert!(listed[0].revoked_at.is_some(), "{listed:?}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_archived_workflow_answers_from_its_record_and_its_creation_key_starts_nothing_again(
    pool: PgPool,
) {
    let token = setup(&pool).await;
    let dir = tempfile::tempdir().unwrap();
    let archive = engine::archive::ArchiveDir::open(dir.path()).unwrap();
    let app = || {
        server::http::router(
            server::state::AppState::new(
                pool.clone(),
                leptos::prelude::LeptosOptions::builder()
                    .output_name("z29c")
                    .build(),
            )
            .with_archive(archive.clone()),
        )
    };
    let send = |method: &str, uri: &str, body: Option<String>| {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.map_or_else(Body::empty, Body::from))
            .unwrap();
        let response = app().oneshot(request);
        async move {
            let response = response.await.unwrap();
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
                .await
                .unwrap();
            (status, serde_json::from_slice::<Value>(&bytes).unwrap())
        }
    };
    let (_, created) = send(
        "POST",
        "/api/v1/workflows",
        Some(start_body("old-1", "Report")),
    )
    .await;
    let id: uuid::Uuid = created["id"].as_str().unwrap().parse().unwrap();
    let approver = engine::operators::Operator {
        id: uuid::Uuid::nil(),
        username: "olga".into(),
        role: Role::Approver,
        via: engine::operators::Via::Console,
        adapters: None,
    };
    engine::recovery::cancel::cancel_workflow(&pool, &approver, id, "customer withdrew")
        .await
        .unwrap();
    sqlx::query("update workflow set settled_at = now() - interval '31 days' where id = $1")
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
    let archiver =
        engine::archive::Archiver::new(pool.clone(), archive.clone(), Default::default());
    let (moved, _) = archiver
        .turn(std::time::Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(moved.workflows, 1);

    let (status, read) = send("GET", &format!("/api/v1/workflows/{id}"), None).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(
        (read["state"].as_str(), read["creation_key"].as_str()),
        (Some("cancelled"), Some("old-1"))
    );
    assert!(read["archived_at"].is_string(), "{read}");
    let (status, again) = send(
        "POST",
        "/api/v1/workflows",
        Some(start_body("old-1", "Report")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["id"], created["id"]);
    assert_eq!(workflow_count(&pool).await, 0, "nothing started again");
    let (status, other) = send(
        "POST",
        "/api/v1/workflows",
        Some(start_body("old-1", "Other")),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{other}");

    // A record the archive no longer holds is said so, never answered from the tombstone alone.
    std::fs::remove_dir_all(dir.path()).unwrap();
    let (status, lost) = send("GET", &format!("/api/v1/workflows/{id}"), None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{lost}");
}
