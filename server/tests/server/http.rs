//! The HTTP surface, driven in-process through the router.

use axum::body::Body;
use http::{Request, StatusCode};
use sqlx::PgPool;
use tower::ServiceExt;

use crate::support::{app, fixture};

async fn get(pool: PgPool, uri: &str) -> (StatusCode, String) {
    let response = app(pool)
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
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
    let (status, text) = get(pool, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
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
