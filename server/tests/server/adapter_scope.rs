//! A token made with `--adapters` changes nothing beyond those adapters: no adapter file or
//! definition that reaches another, no action, bulk run or incident resolution on another's
//! steps, no pause of a workflow reaching another (docs/security.md).

use engine::domain::{ContractKind, Role};
use engine::store::journal::Actor;
use engine::store::token::NewToken;
use http::StatusCode;
use serde_json::json;
use sqlx::PgPool;

use crate::api::call;
use crate::console::fixture_review_step;
use crate::ops_api::post_if_match;

/// A token `name` with `role` (that may configure when `configure`) that may use only the
/// adapters `limit` names.
pub(crate) async fn limited(
    pool: &PgPool,
    name: &str,
    role: Role,
    configure: bool,
    limit: &[&str],
) -> String {
    let limit: Vec<String> = limit.iter().map(|a| (*a).to_owned()).collect();
    let new = NewToken {
        name,
        role,
        creation_key_prefix: None,
        may_configure: configure,
        adapters: Some(&limit),
        on_behalf_of: None,
    };
    engine::store::token::create(pool, &new, Actor::Engine("test"))
        .await
        .unwrap()
}

async fn count(pool: &PgPool, table: &str) -> i64 {
    sqlx::query_scalar(&format!("select count(*) from {table}"))
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_token_limited_to_some_adapters_applies_no_file_and_no_definition_reaching_another(
    pool: PgPool,
) {
    let mailer = limited(&pool, "mail-deploy", Role::Viewer, true, &["mail"]).await;
    let opaque = include_str!("../../../adapters/opaque-docs.yaml");
    let (status, refused) = call(
        &pool,
        "PUT",
        "/api/v1/adapters/opaque-docs",
        Some(&mailer),
        Some(opaque.into()),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("opaque-docs"),
        "{refused}"
    );
    assert_eq!(count(&pool, "adapter").await, 0);

    // Its steps may choose any of `docs`, `*-docs`, `letters-*`…: more than `mail`.
    let definition = include_str!("../../../definitions/document_delivery.v1.yaml");
    let (status, refused) = call(
        &pool,
        "PUT",
        "/api/v1/definitions/document_delivery/1",
        Some(&mailer),
        Some(definition.into()),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(count(&pool, "definition").await, 0);

    // A token whose patterns cover every adapter the file names applies it.
    let docs = [
        "docs",
        "*-docs",
        "*-reviewed",
        "letters",
        "letters-*",
        "bench-*",
    ];
    let deployer = limited(&pool, "docs-deploy", Role::Viewer, true, &docs).await;
    let (status, applied) = call(
        &pool,
        "PUT",
        "/api/v1/definitions/document_delivery/1",
        Some(&deployer),
        Some(definition.into()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{applied}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_token_limited_to_some_adapters_neither_acts_on_nor_bulk_runs_another_adapters_step(
    pool: PgPool,
) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "scope-1").await;
    let state = || async {
        sqlx::query_scalar::<_, String>("select state::text from step where id = $1")
            .bind(step)
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let mailer = limited(&pool, "mail-oncall", Role::Approver, false, &["mail"]).await;
    let waive = json!({"reason": "not ours", "residual_uncertainty": "may have been sent"});
    let uri = format!("/api/v1/steps/{step}/actions/waive");
    let (status, refused) = post_if_match(&pool, &uri, &mailer, None, waive.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("letters-opaque"),
        "{refused}"
    );
    assert_eq!(state().await, "review_required");

    let (_, shown) = call(
        &pool,
        "GET",
        &format!("/api/v1/steps/{step}"),
        Some(&mailer),
        None,
    )
    .await;
    let start = json!({
        "action": "cancel",
        "reason": "not ours either",
        "rate_per_sec": 50,
        "rows": [{"step": step, "version": shown["version"]}],
    });
    let (status, refused) = post_if_match(&pool, "/api/v1/bulk", &mailer, None, start).await;
    assert!(status.is_client_error(), "{status}: {refused}");
    assert_eq!(count(&pool, "bulk_run").await, 0);
    assert_eq!(state().await, "review_required");

    let letters = limited(
        &pool,
        "letters-oncall",
        Role::Approver,
        false,
        &["letters-*"],
    )
    .await;
    let (status, done) = post_if_match(&pool, &uri, &letters, None, waive).await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(state().await, "waived");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_token_limited_to_some_adapters_neither_pauses_a_workflow_reaching_another_nor_resolves_its_incident(
    pool: PgPool,
) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "scope-2").await;
    let workflow = crate::console::workflow_of(&pool, step).await;
    let mailer = limited(&pool, "mail-oncall", Role::Approver, false, &["mail"]).await;
    let (status, refused) = post_if_match(
        &pool,
        &format!("/api/v1/workflows/{workflow}/pause"),
        &mailer,
        None,
        json!({"reason": "not ours"}),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    let paused: i64 =
        sqlx::query_scalar("select count(*) from workflow where paused_at is not null")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(paused, 0);

    let mut tx = pool.begin().await.unwrap();
    let incident =
        engine::store::incident::open_duplicate_incident(&mut tx, step, &[("x-scope-2", None)])
            .await
            .unwrap();
    tx.commit().await.unwrap();
    let (status, refused) = post_if_match(
        &pool,
        &format!("/api/v1/incidents/{incident}/resolve"),
        &mailer,
        None,
        json!({"canonical": "x-scope-2", "disposition": "accept_unresolved", "reason": "not ours"}),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    let resolved: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("select resolved_at from integrity_incident where id = $1")
            .bind(incident)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(resolved, None);
}
