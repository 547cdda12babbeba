//! The HTTP surface, driven in-process through the router.

use axum::body::Body;
use http::{Request, StatusCode};
use sqlx::PgPool;
use tower::ServiceExt;

use crate::support::{app, fixture};

async fn get(pool: PgPool, uri: &str) -> (StatusCode, String) {
    get_from(app(pool), uri, None).await
}

/// `GET uri` of `router`, with `token` as its bearer when given: the status and the body.
async fn get_from(router: axum::Router, uri: &str, token: Option<&str>) -> (StatusCode, String) {
    let mut request = Request::get(uri);
    if let Some(token) = token {
        request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let response = router
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn readyz_answers_ready_on_a_migrated_database(pool: PgPool) {
    assert_eq!(
        get(pool, "/readyz").await,
        (StatusCode::OK, "ready\n".into())
    );
}

#[sqlx::test(migrations = false)]
async fn readyz_refuses_while_migrations_are_pending(pool: PgPool) {
    let (status, body) = get(pool, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.starts_with("not ready: 0 of "), "{body}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn readyz_refuses_when_the_database_is_gone(pool: PgPool) {
    pool.close().await;
    let (status, body) = get(pool, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body, "not ready: the database does not answer\n");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn healthz_answers_while_the_process_is_up(pool: PgPool) {
    assert_eq!(get(pool, "/healthz").await, (StatusCode::OK, "ok\n".into()));
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_unknown_page_answers_404(pool: PgPool) {
    let (status, html) = get(pool, "/no/such/page").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(html.contains("Page not found"), "{html}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn metrics_expose_the_projection_counters_and_current_gauges(pool: PgPool) {
    fixture::counted(&pool, "z29c_recovery_path_total", &[("path", "replay")], 3).await;
    fixture::counted(
        &pool,
        "z29c_attempts_total",
        &[
            ("adapter", "docs"),
            ("logical", "deliver"),
            ("outcome", "outcome_unknown"),
        ],
        2,
    )
    .await;
    let text = crate::support::scrape_metrics(&pool).await;
    assert!(
        text.contains(r#"z29c_recovery_path_total{path="replay"} 3"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"z29c_attempts_total{adapter="docs",logical="deliver",outcome="outcome_unknown"} 2"#
        ),
        "{text}"
    );
    assert!(
        text.contains("z29c_unknown_outcome_oldest_seconds 0"),
        "{text}"
    );
    assert!(text.contains("z29c_outbox_unpublished 0"), "{text}");
    assert!(
        text.contains("# TYPE z29c_recovery_path_total counter"),
        "{text}"
    );
    assert!(text.contains("process_resident_memory_bytes"), "{text}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn metrics_answer_only_a_token_that_sees_every_workflow_and_fold_nothing_for_others(
    pool: PgPool,
) {
    use engine::domain::Role;
    // A change of state the next fold would move into the kept counts.
    fixture::counted(&pool, "z29c_recovery_path_total", &[("path", "replay")], 3).await;
    sqlx::query("insert into workflow_state_delta (state, n) values ('running', 1)")
        .execute(&pool)
        .await
        .unwrap();
    let deltas = || async {
        sqlx::query_scalar::<_, i64>("select count(*) from workflow_state_delta")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let scoped = crate::api::token(&pool, "team", Role::Viewer, Some("team-")).await;
    for (token, refused) in [
        (None, StatusCode::UNAUTHORIZED),
        (Some("z29c_not_a_token"), StatusCode::UNAUTHORIZED),
        (Some(scoped.as_str()), StatusCode::FORBIDDEN),
    ] {
        let (status, body) = get_from(app(pool.clone()), "/metrics", token).await;
        assert_eq!(status, refused, "{token:?}: {body}");
        assert!(!body.contains("z29c_recovery_path_total"), "{body}");
        assert_eq!(deltas().await, 1, "{token:?} folded the counts");
    }
    let viewer = crate::api::token(&pool, "prometheus", Role::Viewer, None).await;
    let (status, body) = get_from(app(pool.clone()), "/metrics", Some(&viewer)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains(r#"z29c_recovery_path_total{path="replay"} 3"#),
        "{body}"
    );
    assert_eq!(deltas().await, 0, "the scrape folds the counts");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_workers_metrics_listener_answers_only_a_token_that_sees_every_workflow(pool: PgPool) {
    use engine::domain::Role;
    let worker = || server::http::scrape::worker_router(pool.clone());
    let scoped = crate::api::token(&pool, "team", Role::Viewer, Some("team-")).await;
    assert_eq!(
        get_from(worker(), "/metrics", None).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        get_from(worker(), "/metrics", Some(&scoped)).await.0,
        StatusCode::FORBIDDEN
    );
    let viewer = crate::api::token(&pool, "prometheus", Role::Viewer, None).await;
    assert_eq!(
        get_from(worker(), "/metrics", Some(&viewer)).await.0,
        StatusCode::OK
    );
}
