//! `/api/v1/definitions`: definitions applied over HTTP, with the refusals `z29c apply` gives.

use axum::http::StatusCode;
use engine::domain::Role;
use serde_json::Value;
use sqlx::PgPool;

use crate::api::{call, token};

const V1: &str = include_str!("../../../definitions/document_delivery.v1.yaml");

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_approver_applies_a_definition_once_and_again_changes_nothing(pool: PgPool) {
    let approver = token(&pool, "deploy", Role::Approver, None).await;
    let path = "/api/v1/definitions/document_delivery/1";

    let (status, first) = call(&pool, "PUT", path, Some(&approver), Some(V1.into())).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(first["result"], "added");
    let (status, again) = call(&pool, "PUT", path, Some(&approver), Some(V1.into())).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["result"], "unchanged");

    let (_, listed) = call(&pool, "GET", "/api/v1/definitions", Some(&approver), None).await;
    assert_eq!(listed[0]["name"], "document_delivery");
    assert_eq!(listed[0]["applied_by"], "token:deploy");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn changing_an_applied_version_is_refused_with_the_diff(pool: PgPool) {
    let approver = token(&pool, "deploy", Role::Approver, None).await;
    let path = "/api/v1/definitions/document_delivery/1";
    call(&pool, "PUT", path, Some(&approver), Some(V1.into())).await;

    let changed = V1.replace("Delivers a document, then", "Delivers a letter, then");
    let (status, body) = call(&pool, "PUT", path, Some(&approver), Some(changed)).await;

    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("give the change a new version"), "{error}");
    assert!(
        error.contains("+description: Delivers a letter, then"),
        "{error}"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_broken_file_or_another_name_than_the_paths_is_refused_and_nothing_stored(pool: PgPool) {
    let approver = token(&pool, "deploy", Role::Approver, None).await;
    let unknown_field = V1.replace("status_step: deliver", "status_step: deliver\nretries: 3");
    let (status, body) = call(
        &pool,
        "PUT",
        "/api/v1/definitions/document_delivery/1",
        Some(&approver),
        Some(unknown_field),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["error"].as_str().unwrap().starts_with("line "),
        "{body}"
    );

    let (status, body) = call(
        &pool,
        "PUT",
        "/api/v1/definitions/payments/1",
        Some(&approver),
        Some(V1.into()),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let stored: i64 = sqlx::query_scalar("select count(*) from definition")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_operator_token_cannot_change_what_workflows_run(pool: PgPool) {
    let operator = token(&pool, "ops", Role::Operator, None).await;

    let (status, body) = call(
        &pool,
        "PUT",
        "/api/v1/definitions/document_delivery/1",
        Some(&operator),
        Some(V1.into()),
    )
    .await;

    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
}

const OPAQUE_DOCS: &str = include_str!("../../../adapters/opaque-docs.yaml");

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_adapter_file_put_twice_is_one_version_and_a_changed_one_the_next_unverified(
    pool: PgPool,
) {
    let approver = token(&pool, "deploy", Role::Approver, None).await;
    let path = "/api/v1/adapters/opaque-docs";

    let (status, first) = call(
        &pool,
        "PUT",
        path,
        Some(&approver),
        Some(OPAQUE_DOCS.into()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (status, again) = call(
        &pool,
        "PUT",
        path,
        Some(&approver),
        Some(OPAQUE_DOCS.into()),
    )
    .await;
    assert_eq!(
        (status, again["result"].as_str()),
        (StatusCode::OK, Some("unchanged"))
    );
    let slower = OPAQUE_DOCS.replace("deadline_ms: 2000", "deadline_ms: 4000");
    let (status, changed) = call(&pool, "PUT", path, Some(&approver), Some(slower)).await;
    assert_eq!(status, StatusCode::CREATED, "{changed}");
    assert_eq!(changed["version"], 2);

    let (_, listed) = call(&pool, "GET", "/api/v1/adapters", Some(&approver), None).await;
    assert_eq!(listed[0]["version"], 2);
    assert_eq!(
        listed[0]["verified_version"],
        Value::Null,
        "a new version is unverified"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_adapter_file_is_refused_for_an_operator_or_under_another_name(pool: PgPool) {
    let operator = token(&pool, "ops", Role::Operator, None).await;
    let approver = token(&pool, "deploy", Role::Approver, None).await;

    let (status, _) = call(
        &pool,
        "PUT",
        "/api/v1/adapters/opaque-docs",
        Some(&operator),
        Some(OPAQUE_DOCS.into()),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = call(
        &pool,
        "PUT",
        "/api/v1/adapters/payments",
        Some(&approver),
        Some(OPAQUE_DOCS.into()),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let stored: i64 = sqlx::query_scalar("select count(*) from adapter")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0);
}
